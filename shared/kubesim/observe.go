package kubesim

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-autoscaler/joiner/shared/facts"
)

// podSeen is what the real scheduler's observer knows of one pod.
type podSeen struct {
	// nominated is the last node the pod was nominated to while pending.
	nominated string
	// reported: the pod was reported unschedulable (for the forwarder) already.
	reported bool
	bound    bool
}

// observeScheduler is the step's scheduling when a real kube-scheduler binds
// (Config.RealScheduler): it waits for the scheduler to act on what changed,
// then reads the pods. A pod newly bound has waited until now; one the
// scheduler marked PodScheduled=False/Unschedulable is reported once, for the
// forwarder; a bound pod its kubelet has not started yet is started (KWOK does
// the same for the nodes it manages; whichever writes first wins).
func (c *Cluster) observeScheduler(ctx context.Context, r *Report, pods *[]*corev1.Pod) error {
	settle := c.cfg.Settle
	if settle == nil {
		settle = c.settleByPods
	}
	if err := settle(ctx); err != nil {
		return fmt.Errorf("kubesim: wait for the scheduler: %w", err)
	}
	list, err := c.listPods(ctx)
	if err != nil {
		return err
	}
	*pods = list
	now := c.cfg.Now()
	live := make(map[types.UID]bool, len(list))
	var pending []*corev1.Pod
	for i, p := range list {
		if !facts.IsActive(p) || facts.IsDaemonSetPod(p) {
			continue
		}
		live[p.UID] = true
		st := c.seen[p.UID]
		if st == nil {
			st = &podSeen{}
			c.seen[p.UID] = st
		}
		if p.Spec.NodeName == "" {
			pending = append(pending, p)
			c.waits.pending(p)
			if p.Status.NominatedNodeName != "" {
				st.nominated = p.Status.NominatedNodeName
			}
			if !st.reported && facts.Unschedulable(p) {
				st.reported = true
				r.Unschedulable = append(r.Unschedulable, PodRef{p.Namespace, p.Name})
			}
			continue
		}
		if !st.bound {
			st.bound = true
			c.waits.bound(p, now)
			r.Bound++
			if st.nominated != "" && st.nominated != p.Spec.NodeName {
				r.Elsewhere++
			}
		}
		if p.Status.Phase == corev1.PodPending {
			out, err := c.startPod(ctx, p, now)
			if err != nil {
				return err
			}
			if out != nil {
				list[i] = out
			}
		}
	}
	c.waits.keepOnly(pending)
	for uid := range c.seen {
		if !live[uid] {
			delete(c.seen, uid)
		}
	}
	return nil
}

// startPod reports a bound pod running and ready, as its kubelet would. A pod
// changed meanwhile (KWOK started it) or gone is left alone.
func (c *Cluster) startPod(ctx context.Context, p *corev1.Pod, now time.Time) (*corev1.Pod, error) {
	p = p.DeepCopy()
	t := metav1.NewTime(now)
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &t
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: t},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: t},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: t},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t},
	}
	out, err := c.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil, nil
	}
	if err != nil {
		return nil, errf(err, "start pod %s/%s on %s", p.Namespace, p.Name, p.Spec.NodeName)
	}
	return out, nil
}

// settleGap is how long the pods must stay unchanged for settleByPods.
const settleGap = 300 * time.Millisecond

// settleByPods waits, without the scheduler's own metrics, until it looks done:
// every pending pod has been judged (bound, or PodScheduled set) and no pod has
// been bound or judged anew for settleGap. A scheduler retrying a pod from its
// backoff queue after that is seen on a later step.
func (c *Cluster) settleByPods(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	last := ""
	for {
		list, err := c.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return errf(err, "list pods")
		}
		sig, judged := podsSignature(list.Items)
		if judged && sig == last {
			return nil
		}
		last = sig
		select {
		case <-ctx.Done():
			return fmt.Errorf("pods still changing after 2m: %w", ctx.Err())
		case <-time.After(settleGap):
		}
	}
}

// podsSignature sums up where the pods stand (bound, judged) and whether every
// pending, ungated pod has been judged.
func podsSignature(pods []corev1.Pod) (string, bool) {
	judged := true
	var sum uint64
	for i := range pods {
		p := &pods[i]
		if !facts.IsActive(p) {
			continue
		}
		h := fnv32(string(p.UID) + "/" + p.Spec.NodeName + "/" + p.ResourceVersion)
		sum += uint64(h)
		if p.Spec.NodeName == "" && len(p.Spec.SchedulingGates) == 0 && !podHasCondition(p, corev1.PodScheduled) {
			judged = false
		}
	}
	return fmt.Sprintf("%d/%x", len(pods), sum), judged
}

func podHasCondition(p *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return true
		}
	}
	return false
}
