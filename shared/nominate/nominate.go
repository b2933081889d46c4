// Package nominate decides which pending pods Joiner nominates to which node, so
// kube-scheduler places them where the plan did. It only decides: an executor
// (shared/kube) writes the NodeClaim annotations and pod status patches. Nothing
// here performs I/O, as in shared/packer and shared/lifecycle.
//
// Joiner makes its plan known by setting status.nominatedNodeName on each pending
// pod to the node its plan put the pod on (KEP-5278; kube-scheduler tries a pod's
// nominated node first and, while the pod is pending, counts it on that node
// against every pod of equal or lower priority). Without it the default profile
// scores LeastAllocated and spreads a burst over the new nodes instead of filling
// them as planned, so pods the plan fitted stay pending and cost another node and
// another boot.
//
// A NodeClaim has no Node to name until its instance registers, so the plan's pods
// for it are recorded on the NodeClaim (PlannedPodsAnnotation) and nominated when
// the Node registers, before karpenter.sh/unregistered is lifted: the scheduler
// cannot place anything there before that, and when the node turns schedulable the
// pods are waiting for it. Each later plan records its pods again (a plan that
// changes moves them), and a pod is nominated only onto a node it still fits.
// kube-scheduler clears a nomination when the pod fails there; the pod then counts
// as pending again and the next plan places it afresh.
package nominate

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/lifecycle"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// PlannedPodsAnnotation on a NodeClaim lists the pods (namespace/name, comma
// separated) the latest plan put on it, to be nominated when its Node registers.
const PlannedPodsAnnotation = "joiner.dev/planned-pods"

// maxPlannedPods bounds the annotation (the API server allows 256 KiB of
// annotations per object); pods past it are nominated by the next plan that sees
// the registered node.
const maxPlannedPods = 64 << 10

// PlannedPods reads a NodeClaim's PlannedPodsAnnotation.
func PlannedPods(nc *karpenter.NodeClaim) []string {
	v := nc.Annotations[PlannedPodsAnnotation]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// PlannedPodsValue is the annotation value for pods, cut to maxPlannedPods.
func PlannedPodsValue(pods []string) string {
	var b strings.Builder
	for _, k := range pods {
		if b.Len()+len(k)+1 > maxPlannedPods {
			break
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
	}
	return b.String()
}

// Input is the cluster as the decision sees it.
type Input struct {
	// Pending are the pods the scheduler gave up on: the only pods nominated.
	Pending []*corev1.Pod
	// Bound and Nominated are the pods bound and nominated to each node, by node
	// name: they hold room there.
	Bound, Nominated map[string][]*corev1.Pod
	NodeClaims       []*karpenter.NodeClaim
	Nodes            []*corev1.Node
}

// Nomination sets Pod's status.nominatedNodeName to Node.
type Nomination struct {
	Pod  *corev1.Pod
	Node string
}

// Record sets a NodeClaim's PlannedPodsAnnotation to Pods (removes it when empty).
type Record struct {
	NodeClaim string
	Pods      []string
}

// Decision is what to write, records first.
type Decision struct {
	Records     []Record
	Nominations []Nomination
}

// Empty reports whether there is nothing to write.
func (d Decision) Empty() bool { return len(d.Records) == 0 && len(d.Nominations) == 0 }

// ForPlan makes a plan's placements onto existing nodes and in-flight NodeClaims
// known: each in-flight NodeClaim records the pods planned for it (one the plan
// gave nothing loses its old list: those pods went elsewhere), and pods planned
// onto a Node that exists (an initialized node, or the registered node of an
// in-flight NodeClaim) are nominated to it where they still fit. New NodeClaims
// carry their pods from creation (their creator sets the annotation).
func ForPlan(in Input, plan *packer.Plan) Decision {
	var d Decision
	claims := make(map[string]*karpenter.NodeClaim, len(in.NodeClaims))
	for _, nc := range in.NodeClaims {
		claims[nc.Name] = nc
	}
	nodes := make(map[string]*corev1.Node, len(in.Nodes))
	byProvider := make(map[string]*corev1.Node, len(in.Nodes))
	for _, n := range in.Nodes {
		nodes[n.Name] = n
		if n.Spec.ProviderID != "" {
			byProvider[n.Spec.ProviderID] = n
		}
	}
	planned := map[string][]string{}
	for _, en := range plan.ExistingNodes {
		if en.InFlight {
			planned[en.Name] = en.Pods
		}
	}
	for _, nc := range in.NodeClaims {
		if nc.DeletionTimestamp != nil || meta.IsStatusConditionTrue(nc.Status.Conditions, karpenter.ConditionInitialized) {
			continue
		}
		if nc.Annotations[PlannedPodsAnnotation] != PlannedPodsValue(planned[nc.Name]) {
			d.Records = append(d.Records, Record{NodeClaim: nc.Name, Pods: planned[nc.Name]})
		}
	}
	f := newFitter(in)
	for _, en := range plan.ExistingNodes {
		var node *corev1.Node
		var nc *karpenter.NodeClaim
		if en.InFlight {
			if nc = claims[en.Name]; nc != nil && nc.Status.ProviderID != "" {
				node = byProvider[nc.Status.ProviderID]
			}
		} else {
			node = nodes[en.Name]
		}
		if node != nil {
			f.place(node, nc, en.Pods)
		}
	}
	d.Nominations = f.out
	return d
}

// ForRegistration nominates the pods planned for each NodeClaim the transitions
// register, to be written before any registration lifts karpenter.sh/unregistered:
// kube-scheduler clears a nomination when it tries the pod on a node that still
// refuses it, and lifting one node's taint makes it retry pods waiting for another.
func ForRegistration(in Input, trs []lifecycle.Transition) Decision {
	var f *fitter
	for _, t := range trs {
		if t.Kind != lifecycle.Register || t.Node == nil {
			continue
		}
		keys := PlannedPods(t.NodeClaim)
		if len(keys) == 0 {
			continue
		}
		if f == nil {
			f = newFitter(in)
		}
		f.place(t.Node, t.NodeClaim, keys)
	}
	if f == nil {
		return Decision{}
	}
	return Decision{Nominations: f.out}
}

// fitter places pods for one decision, keeping each node's room current as it
// nominates, so two pods are never nominated into one slot.
type fitter struct {
	pending map[string]*corev1.Pod
	in      Input
	// room is each node's free allocatable, ports the host ports in use, once looked at.
	room  map[string]corev1.ResourceList
	ports map[string]map[facts.HostPort]bool
	out   []Nomination
}

func newFitter(in Input) *fitter {
	f := &fitter{in: in, pending: make(map[string]*corev1.Pod, len(in.Pending)),
		room: map[string]corev1.ResourceList{}, ports: map[string]map[facts.HostPort]bool{}}
	for _, p := range in.Pending {
		f.pending[facts.PodKey(p)] = p
	}
	return f
}

// place nominates the pods (by key) onto node where each still fits: the pod is
// pending, its node selector and required affinity match the node's labels (with
// those the NodeClaim will sync at registration), it tolerates the node's taints
// (but for karpenter.sh/unregistered and the NodeClaim's startup taints, which are
// about to go), its host ports are free and its requests fit the node's free
// allocatable (resources the node does not advertise yet, such as GPUs before the
// device plugin starts, count at what the NodeClaim expects).
func (f *fitter) place(node *corev1.Node, nc *karpenter.NodeClaim, keys []string) {
	view := node
	if nc != nil {
		view = lifecycle.Registered(nc, node)
		view.Spec.Taints = slices.DeleteFunc(view.Spec.Taints, func(t corev1.Taint) bool {
			return slices.ContainsFunc(nc.Spec.StartupTaints, func(s corev1.Taint) bool { return s.MatchTaint(&t) })
		})
	}
	room, ok := f.room[node.Name]
	if !ok {
		room = corev1.ResourceList{}
		for k, v := range node.Status.Allocatable {
			room[k] = v.DeepCopy()
		}
		if nc != nil {
			for k, v := range nc.Status.Allocatable {
				if _, ok := room[k]; !ok {
					room[k] = v.DeepCopy()
				}
			}
		}
		ports := map[facts.HostPort]bool{}
		for _, on := range [][]*corev1.Pod{f.in.Bound[node.Name], f.in.Nominated[node.Name]} {
			for _, p := range on {
				facts.SubtractPod(room, facts.PodRequests(p))
				takeSlot(room)
				for _, hp := range facts.HostPorts(&p.Spec) {
					ports[hp] = true
				}
			}
		}
		f.room[node.Name], f.ports[node.Name] = room, ports
	}
	ports := f.ports[node.Name]
	for _, key := range keys {
		p := f.pending[key]
		if p == nil || p.Status.NominatedNodeName == node.Name {
			continue
		}
		if ok, err := nodeaffinity.GetRequiredNodeAffinity(p).Match(view); err != nil || !ok {
			continue
		}
		if _, bad := corev1helpers.FindMatchingUntoleratedTaint(quiet, view.Spec.Taints, p.Spec.Tolerations, schedulingTaint, true); bad {
			continue
		}
		hps := facts.HostPorts(&p.Spec)
		if slices.ContainsFunc(hps, func(hp facts.HostPort) bool { return ports[hp] }) {
			continue
		}
		req := facts.PodRequests(p)
		if !fits(room, req) {
			continue
		}
		facts.SubtractPod(room, req)
		takeSlot(room)
		for _, hp := range hps {
			ports[hp] = true
		}
		delete(f.pending, key) // one node per pod and decision
		f.out = append(f.out, Nomination{Pod: p, Node: node.Name})
	}
}

// quiet is the logger the toleration helper wants; it has nothing to say here.
var quiet = klog.Background()

// schedulingTaint selects the taints that keep a pod off a node (PreferNoSchedule
// only scores).
func schedulingTaint(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// takeSlot takes one pod slot off room.
func takeSlot(room corev1.ResourceList) {
	if cur, ok := room[corev1.ResourcePods]; ok {
		cur.Sub(*resource.NewQuantity(1, resource.DecimalSI))
		room[corev1.ResourcePods] = cur
	}
}

// fits reports whether req and one pod slot fit room. A resource room does not
// list is one the node does not have.
func fits(room, req corev1.ResourceList) bool {
	for name, q := range req {
		if q.IsZero() {
			continue
		}
		have, ok := room[name]
		if !ok || have.Cmp(q) < 0 {
			return false
		}
	}
	if slots, ok := room[corev1.ResourcePods]; ok && slots.Sign() <= 0 {
		return false
	}
	return true
}
