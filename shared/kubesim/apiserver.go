package kubesim

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var (
	podsGVR  = corev1.SchemeGroupVersion.WithResource("pods")
	nodesGVR = corev1.SchemeGroupVersion.WithResource("nodes")
	pdbsGVR  = policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets")

	claimsGVR         = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	volumesGVR        = corev1.SchemeGroupVersion.WithResource("persistentvolumes")
	storageClassesGVR = storagev1.SchemeGroupVersion.WithResource("storageclasses")
	pdbsGVK           = policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget")
)

// apiServer adds to the fake clients what a real API server does and Joiner relies on:
// generateName, UIDs and creation timestamps on create; deletion held by finalizers
// (a deleted NodeClaim keeps existing, with a deletionTimestamp, until its finalizer
// is removed); and the eviction subresource honouring PodDisruptionBudgets. Reactors
// run under the fake client's lock, so they reach objects through the trackers only.
type apiServer struct {
	cs  *fake.Clientset
	dyn *dynamicfake.FakeDynamicClient
	now func() time.Time
	seq atomic.Uint64
	// writes counts writes to built-in objects: a step with none since the last one
	// (and no node registered or removed) has nothing to react to.
	writes atomic.Uint64
}

func newAPIServer(cs *fake.Clientset, dyn *dynamicfake.FakeDynamicClient, now func() time.Time) *apiServer {
	a := &apiServer{cs: cs, dyn: dyn, now: now}
	// Nodes hold for finalizers too: Karpenter puts karpenter.sh/termination on every
	// Node it registers. Prepended first, so countWrites (prepended after) still sees
	// every write before these handle it.
	cs.PrependReactor("delete", "nodes", a.holdForFinalizers(cs.Tracker()))
	cs.PrependReactor("patch", "nodes", releaseWhenFinalized(cs.Tracker()))
	cs.PrependReactor("update", "nodes", releaseWhenFinalized(cs.Tracker()))
	cs.PrependReactor("patch", "pods", a.nominate)
	cs.PrependReactor("*", "*", a.countWrites)
	cs.PrependReactor("create", "*", a.defaults)
	cs.PrependReactor("create", "pods", a.evict)
	dyn.PrependReactor("create", "*", a.defaults)
	dyn.PrependReactor("delete", "nodeclaims", a.holdForFinalizers(dyn.Tracker()))
	dyn.PrependReactor("patch", "nodeclaims", releaseWhenFinalized(dyn.Tracker()))
	dyn.PrependReactor("update", "nodeclaims", releaseWhenFinalized(dyn.Tracker()))
	return a
}

func (a *apiServer) countWrites(act k8stesting.Action) (bool, runtime.Object, error) {
	if r := act.GetResource().Resource; r == "leases" || r == "events" {
		return false, nil, nil // the functions' own bookkeeping: nothing a controller reacts to
	}
	switch act.GetVerb() {
	case "create", "update", "patch", "delete", "deletecollection":
		a.writes.Add(1)
	}
	return false, nil, nil
}

// defaults fills what the API server sets on create; the default reaction then stores it.
func (a *apiServer) defaults(act k8stesting.Action) (bool, runtime.Object, error) {
	ca, ok := act.(k8stesting.CreateAction)
	if !ok || act.GetSubresource() != "" {
		return false, nil, nil
	}
	m, err := meta.Accessor(ca.GetObject())
	if err != nil {
		return false, nil, nil
	}
	n := a.seq.Add(1)
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(m.GetGenerateName() + suffix(n))
	}
	if m.GetUID() == "" {
		m.SetUID(types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", n)))
	}
	if ts := m.GetCreationTimestamp(); ts.IsZero() {
		m.SetCreationTimestamp(metav1.NewTime(a.now()))
	}
	return false, nil, nil
}

// suffix is a generateName suffix: five lowercase alphanumerics, as the API server's.
func suffix(n uint64) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	x := n*2654435761 + 12345
	b := make([]byte, 5)
	for i := range b {
		b[i] = alphabet[x%uint64(len(alphabet))]
		x /= uint64(len(alphabet))
	}
	return string(b)
}

// holdForFinalizers turns the deletion of an object with finalizers into setting its
// deletionTimestamp, as the API server does.
func (a *apiServer) holdForFinalizers(tr k8stesting.ObjectTracker) k8stesting.ReactionFunc {
	return func(act k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := tr.Get(act.GetResource(), act.GetNamespace(), act.(k8stesting.DeleteAction).GetName())
		if err != nil {
			return false, nil, nil
		}
		m, _ := meta.Accessor(obj)
		if len(m.GetFinalizers()) == 0 {
			return false, nil, nil
		}
		if m.GetDeletionTimestamp() == nil {
			ts := metav1.NewTime(a.now())
			m.SetDeletionTimestamp(&ts)
			if err := tr.Update(act.GetResource(), obj, act.GetNamespace()); err != nil {
				return true, nil, err
			}
		}
		return true, nil, nil
	}
}

// releaseWhenFinalized applies a patch or update and, when it leaves a deleting object
// without finalizers, deletes it.
func releaseWhenFinalized(tr k8stesting.ObjectTracker) k8stesting.ReactionFunc {
	return func(act k8stesting.Action) (bool, runtime.Object, error) {
		handled, obj, err := k8stesting.ObjectReaction(tr)(act)
		if err != nil || obj == nil {
			return handled, obj, err
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return handled, obj, nil
		}
		if m.GetDeletionTimestamp() != nil && len(m.GetFinalizers()) == 0 {
			if err := tr.Delete(act.GetResource(), act.GetNamespace(), m.GetName()); err != nil && !apierrors.IsNotFound(err) {
				return true, nil, err
			}
		}
		return handled, obj, nil
	}
}

// nominate serves a merge patch of a pod's status.nominatedNodeName alone (Joiner's
// nominations, thousands in a burst) without the fake's JSON round trip of the whole
// pod, refusing it on a bound pod as the API server's validation does. Other patches
// go to the default reaction.
func (a *apiServer) nominate(act k8stesting.Action) (bool, runtime.Object, error) {
	pa, ok := act.(k8stesting.PatchAction)
	if !ok || act.GetSubresource() != "status" || pa.GetPatchType() != types.MergePatchType {
		return false, nil, nil
	}
	var body struct {
		Status struct {
			NominatedNodeName *string `json:"nominatedNodeName"`
		} `json:"status"`
	}
	var keys map[string]map[string]json.RawMessage
	if json.Unmarshal(pa.GetPatch(), &keys) != nil || len(keys) != 1 || len(keys["status"]) != 1 ||
		json.Unmarshal(pa.GetPatch(), &body) != nil || body.Status.NominatedNodeName == nil {
		return false, nil, nil
	}
	tr := a.cs.Tracker()
	obj, err := tr.Get(podsGVR, act.GetNamespace(), pa.GetName())
	if err != nil {
		return true, nil, err
	}
	pod := obj.(*corev1.Pod)
	if pod.Spec.NodeName != "" && *body.Status.NominatedNodeName != "" {
		return true, nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Pod").GroupKind(), pod.Name, field.ErrorList{
			field.Forbidden(field.NewPath("status", "nominatedNodeName"), "may not be set on pods that are already bound to a node")})
	}
	pod.Status.NominatedNodeName = *body.Status.NominatedNodeName
	return true, pod, tr.Update(podsGVR, pod, pod.Namespace)
}

// evict serves the eviction subresource: a pod selected by a PodDisruptionBudget that
// allows no disruption is refused with 429, as the API server refuses it; otherwise
// the budget is charged and the pod deleted (its controller recreates it).
func (a *apiServer) evict(act k8stesting.Action) (bool, runtime.Object, error) {
	if act.GetSubresource() != "eviction" {
		return false, nil, nil
	}
	ev, ok := act.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
	if !ok {
		return true, nil, apierrors.NewBadRequest("eviction body is not a policy/v1 Eviction")
	}
	tr := a.cs.Tracker()
	obj, err := tr.Get(podsGVR, act.GetNamespace(), ev.Name)
	if err != nil {
		return true, nil, err
	}
	pod := obj.(*corev1.Pod)
	if p := ev.DeleteOptions; p != nil && p.Preconditions != nil && p.Preconditions.UID != nil && *p.Preconditions.UID != pod.UID {
		return true, nil, apierrors.NewConflict(podsGVR.GroupResource(), pod.Name, fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s)", *p.Preconditions.UID, pod.UID))
	}
	if pod.Status.Phase == corev1.PodRunning {
		if err := a.chargeBudget(pod); err != nil {
			return true, nil, err
		}
	}
	return true, nil, tr.Delete(podsGVR, pod.Namespace, pod.Name)
}

func (a *apiServer) chargeBudget(pod *corev1.Pod) error {
	tr := a.cs.Tracker()
	list, err := tr.List(pdbsGVR, pdbsGVK, pod.Namespace)
	if err != nil {
		return err
	}
	var hit []*policyv1.PodDisruptionBudget
	for i := range list.(*policyv1.PodDisruptionBudgetList).Items {
		pdb := &list.(*policyv1.PodDisruptionBudgetList).Items[i]
		if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil && !sel.Empty() && sel.Matches(labels.Set(pod.Labels)) {
			hit = append(hit, pdb)
		}
	}
	switch {
	case len(hit) == 0:
		return nil
	case len(hit) > 1:
		return apierrors.NewInternalError(fmt.Errorf("this pod has more than one PodDisruptionBudget, which the eviction subresource does not support"))
	case hit[0].Status.DisruptionsAllowed <= 0:
		return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	}
	hit[0].Status.DisruptionsAllowed--
	return tr.Update(pdbsGVR, hit[0], pod.Namespace)
}
