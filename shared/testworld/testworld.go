// Package testworld builds clusters in memory for the tests of the decisions:
// NodePools and the default EC2NodeClass, nodes of catalog instance types with
// the NodeClaims Joiner would have written for them, pods (ReplicaSet, DaemonSet,
// pending), PodDisruptionBudgets and disruption budgets. The disruption tests, the
// nomination tests and the handlers' in-memory tests (over the Recorder) all build
// their worlds with it, so a fixture is written once and every decision is tested
// on objects of the same shape.
//
// A World holds what the API server would list. Its Snapshot is the packing
// engine's view as the disruption tests hand it to disruption.Decide; Nodes, Pods,
// NodeClaims and PDBs are the lists, for kube.NewState to assemble as ReadState
// does.
//
// It imports only the API types, the catalog and the packer (never kube,
// disruption, nominate or handlers), so the tests of each of those can use it.
package testworld

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// Zone is the zone of every node and pool unless a test says otherwise.
const Zone = "us-east-1a"

// ClassName is the default EC2NodeClass every pool refers to.
const ClassName = "default"

// Req is a NodePool requirement.
func Req(key string, op corev1.NodeSelectorOperator, vals ...string) karpenter.NodeSelectorRequirementWithMinValues {
	return karpenter.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: vals}
}

// PoolOption changes a pool Pool builds.
type PoolOption func(*karpenter.NodePool)

// Budgets sets the pool's disruption budgets.
func Budgets(bs ...karpenter.Budget) PoolOption {
	return func(np *karpenter.NodePool) { np.Spec.Disruption.Budgets = bs }
}

// CapacityTypes replaces the pool's capacity types (on-demand only by default).
func CapacityTypes(cts ...string) PoolOption {
	return func(np *karpenter.NodePool) {
		setReq(np, Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, cts...))
	}
}

// Zones replaces the pool's zones (Zone by default).
func Zones(zones ...string) PoolOption {
	return func(np *karpenter.NodePool) {
		setReq(np, Req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zones...))
	}
}

func setReq(np *karpenter.NodePool, r karpenter.NodeSelectorRequirementWithMinValues) {
	reqs := np.Spec.Template.Spec.Requirements
	for i := range reqs {
		if reqs[i].Key == r.Key {
			reqs[i] = r
			return
		}
	}
	np.Spec.Template.Spec.Requirements = append(reqs, r)
}

// Pool is an on-demand pool in Zone limited to types, with the consolidation
// policy and consolidateAfter given, referring to the default class.
func Pool(name string, policy karpenter.ConsolidationPolicy, after time.Duration, types []string, opts ...PoolOption) *karpenter.NodePool {
	np := &karpenter.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: karpenter.NodePoolSpec{
		Template: karpenter.NodeClaimTemplate{Spec: karpenter.NodeClaimTemplateSpec{
			Requirements: []karpenter.NodeSelectorRequirementWithMinValues{
				Req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, types...),
				Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpenter.CapacityTypeOnDemand),
				Req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, Zone),
			},
			NodeClassRef: ClassRef(),
		}},
		Disruption: karpenter.Disruption{ConsolidationPolicy: policy, ConsolidateAfter: karpenter.NewDuration(after)},
	}}
	for _, o := range opts {
		o(np)
	}
	return np
}

// ClassRef refers to the default EC2NodeClass.
func ClassRef() *karpenter.NodeClassReference {
	return &karpenter.NodeClassReference{Group: karpenter.AWSGroup, Kind: karpenter.NodeClassKind, Name: ClassName}
}

// Class is the default EC2NodeClass: AL2023, latest alias, discovery-tagged
// subnets and security groups.
func Class() *karpenter.EC2NodeClass {
	fam := karpenter.AMIFamilyAL2023
	return &karpenter.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: ClassName}, Spec: karpenter.EC2NodeClassSpec{
		AMIFamily:                  &fam,
		AMISelectorTerms:           []karpenter.AMISelectorTerm{{Alias: "al2023@latest"}},
		Role:                       "KarpenterNodeRole-test",
		SubnetSelectorTerms:        []karpenter.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
		SecurityGroupSelectorTerms: []karpenter.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
	}}
}

// World is one cluster in memory at one instant.
type World struct {
	t testing.TB
	// Now is the decision time; ages are measured back from it.
	Now time.Time
	// Snapshot holds the pools, the class, the catalog, the nodes with the pods
	// bound to them, and the pending pods, as the engine sees them.
	Snapshot *packer.Snapshot
	// NodeClaims are every NodeClaim, in creation order.
	NodeClaims []*karpenter.NodeClaim
	// PDBs are the PodDisruptionBudgets.
	PDBs []*policyv1.PodDisruptionBudget
	// CapacityType of the next nodes Managed and Node add (on-demand when empty).
	CapacityType string
}

// New is a world at now with the pools, the default class and the embedded catalog.
func New(t testing.TB, now time.Time, pools ...*karpenter.NodePool) *World {
	return &World{t: t, Now: now, Snapshot: &packer.Snapshot{NodePools: pools,
		NodeClasses: []*karpenter.EC2NodeClass{Class()}, Catalog: catalog.Embedded()}}
}

// Ago is the time d before Now.
func (w *World) Ago(d time.Duration) metav1.Time { return metav1.NewTime(w.Now.Add(-d)) }

// Pool returns the world's pool of that name; a missing one fails the test.
func (w *World) Pool(name string) *karpenter.NodePool {
	for _, np := range w.Snapshot.NodePools {
		if np.Name == name {
			return np
		}
	}
	w.t.Fatalf("testworld: no pool %s", name)
	return nil
}

// ProviderID is the providerID of the node named name (instance i-<name>).
func ProviderID(name string) string { return fmt.Sprintf("aws:///%s/i-%s", Zone, name) }

// Managed adds a node Joiner launched age ago, of instanceType in pool, with its
// launched, registered and initialized NodeClaim <name>-claim, running pods.
func (w *World) Managed(name, pool, instanceType string, age time.Duration, pods ...*corev1.Pod) (*corev1.Node, *karpenter.NodeClaim) {
	n := w.Node(name, pool, instanceType, age, pods...)
	nc := &karpenter.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-claim", CreationTimestamp: w.Ago(age),
			Labels: map[string]string{karpenter.NodePoolLabelKey: pool, corev1.LabelInstanceTypeStable: instanceType}},
		Spec: karpenter.NodeClaimSpec{NodeClassRef: ClassRef()},
		Status: karpenter.NodeClaimStatus{NodeName: name, ProviderID: n.Spec.ProviderID, ImageID: "ami-current",
			Conditions: []metav1.Condition{
				{Type: karpenter.ConditionLaunched, Status: metav1.ConditionTrue, LastTransitionTime: w.Ago(age)},
				{Type: karpenter.ConditionRegistered, Status: metav1.ConditionTrue, LastTransitionTime: w.Ago(age)},
				{Type: karpenter.ConditionInitialized, Status: metav1.ConditionTrue, LastTransitionTime: w.Ago(age)},
			}},
	}
	w.NodeClaims = append(w.NodeClaims, nc)
	return n, nc
}

// InFlight adds a NodeClaim launched age ago as instance id of instanceType in
// zone (capacityType), whose node has not registered yet: in-flight capacity, as
// the provisioner leaves it. Its capacity and allocatable are the catalog's.
func (w *World) InFlight(name, pool, instanceType, zone, capacityType, id string, age time.Duration) *karpenter.NodeClaim {
	it, ok := w.Snapshot.Catalog.Lookup(instanceType)
	if !ok {
		w.t.Fatalf("testworld: no instance type %s", instanceType)
	}
	nc := &karpenter.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: w.Ago(age), Labels: map[string]string{
			karpenter.NodePoolLabelKey: pool, corev1.LabelInstanceTypeStable: instanceType,
			corev1.LabelTopologyZone: zone, karpenter.CapacityTypeLabelKey: capacityType}},
		Spec: karpenter.NodeClaimSpec{NodeClassRef: ClassRef()},
		Status: karpenter.NodeClaimStatus{ProviderID: "aws:///" + zone + "/" + id, ImageID: "ami-current",
			Capacity: catalog.Capacity(it), Allocatable: catalog.Allocatable(it, catalog.OverheadFor(Class())),
			Conditions: []metav1.Condition{{Type: karpenter.ConditionLaunched, Status: metav1.ConditionTrue, LastTransitionTime: w.Ago(age)}}},
	}
	w.NodeClaims = append(w.NodeClaims, nc)
	return nc
}

// Node adds a Ready node of instanceType created age ago, without a NodeClaim
// (pool "" leaves the NodePool label off: a node Joiner did not launch), with the
// catalog's labels, capacity and allocatable, running pods.
func (w *World) Node(name, pool, instanceType string, age time.Duration, pods ...*corev1.Pod) *corev1.Node {
	it, ok := w.Snapshot.Catalog.Lookup(instanceType)
	if !ok {
		w.t.Fatalf("testworld: no instance type %s", instanceType)
	}
	ct := w.CapacityType
	if ct == "" {
		ct = karpenter.CapacityTypeOnDemand
	}
	var off catalog.Offering
	found := false
	for _, o := range it.Offerings {
		if o.Zone == Zone && o.CapacityType == ct {
			off, found = o, true
		}
	}
	if !found {
		w.t.Fatalf("testworld: %s has no %s offering in %s", instanceType, ct, Zone)
	}
	l := catalog.Labels(it, off)
	l[corev1.LabelHostname] = name
	if pool != "" {
		l[karpenter.NodePoolLabelKey] = pool
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, CreationTimestamp: w.Ago(age)},
		Spec:       corev1.NodeSpec{ProviderID: ProviderID(name)},
		Status: corev1.NodeStatus{
			Capacity:    catalog.Capacity(it),
			Allocatable: catalog.Allocatable(it, catalog.OverheadFor(Class())),
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, p := range pods {
		p.Spec.NodeName = name
		p.Status.Phase = corev1.PodRunning
	}
	w.Snapshot.Nodes = append(w.Snapshot.Nodes, packer.NodeState{Node: n, Pods: pods})
	return n
}

// Pending adds pods the scheduler could not place (see PendingPod).
func (w *World) Pending(pods ...*corev1.Pod) {
	w.Snapshot.Pods = append(w.Snapshot.Pods, pods...)
}

// PDB adds a PodDisruptionBudget in namespace default over the pods matching
// match, allowing allowed disruptions now.
func (w *World) PDB(name string, allowed int32, match map[string]string) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: match}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
	w.PDBs = append(w.PDBs, pdb)
	return pdb
}

// Nodes lists the world's nodes, in the order they were added.
func (w *World) Nodes() []*corev1.Node {
	var out []*corev1.Node
	for _, ns := range w.Snapshot.Nodes {
		out = append(out, ns.Node)
	}
	return out
}

// Pods lists the world's pods: those of every node (in node order), then the
// pending ones.
func (w *World) Pods() []*corev1.Pod {
	var out []*corev1.Pod
	for _, ns := range w.Snapshot.Nodes {
		out = append(out, ns.Pods...)
	}
	return append(out, w.Snapshot.Pods...)
}

// PodOption changes a pod.
type PodOption func(*corev1.Pod)

// Labels adds labels (key, value, key, value, ...).
func Labels(kv ...string) PodOption {
	return func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

// Annotated adds an annotation.
func Annotated(k, v string) PodOption {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

// Selecting sets the pod's node selector to k=v.
func Selecting(k, v string) PodOption {
	return func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{k: v} }
}

// AppPod is a ReplicaSet pod in namespace default labelled app=<name>, created an
// hour before now, requesting cpu and mem.
func AppPod(now time.Time, name, cpu, mem string, opts ...PodOption) *corev1.Pod {
	yes := true
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name},
			CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name + "-rs", Controller: &yes}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// DaemonSetPod is node's kube-proxy pod (a DaemonSet's: it never keeps a node
// busy), created a minute before now.
func DaemonSetPod(now time.Time, node string) *corev1.Pod {
	yes := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy-" + node, Namespace: "kube-system", CreationTimestamp: metav1.NewTime(now.Add(-time.Minute)),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "kube-proxy", Controller: &yes}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "p", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}}}},
	}
}

// PendingPod is an AppPod the scheduler left unscheduled.
func PendingPod(now time.Time, name, cpu, mem string, opts ...PodOption) *corev1.Pod {
	p := AppPod(now, name, cpu, mem, opts...)
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	return p
}

// SmallClaim is a NodeClaim of pool default expecting 4 CPUs, 110 pods and one
// NVIDIA GPU, Initialized or not yet: the in-flight capacity of the snapshot and
// nomination tests, which need a NodeClaim's arithmetic, not a catalog type.
func SmallClaim(name, providerID string, initialized bool) *karpenter.NodeClaim {
	nc := &karpenter.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpenter.NodePoolLabelKey: "default"}}}
	nc.Status.ProviderID = providerID
	nc.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110"),
		karpenter.ResourceNVIDIAGPU: resource.MustParse("1")}
	st := metav1.ConditionUnknown
	if initialized {
		st = metav1.ConditionTrue
	}
	nc.Status.Conditions = []metav1.Condition{{Type: karpenter.ConditionInitialized, Status: st}}
	return nc
}
