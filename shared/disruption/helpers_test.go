package disruption

import (
	"fmt"
	"strings"
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

// now is the decision time of every test: a Wednesday, 12:00 UTC.
var now = time.Date(2025, 6, 11, 12, 0, 0, 0, time.UTC)

const zone = "us-east-1a"

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

func req(key string, op corev1.NodeSelectorOperator, vals ...string) karpenter.NodeSelectorRequirementWithMinValues {
	return karpenter.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: vals}
}

type poolOpt func(*karpenter.NodePool)

// testPool is an on-demand pool in one zone limited to types.
func testPool(name string, policy karpenter.ConsolidationPolicy, after time.Duration, types []string, opts ...poolOpt) *karpenter.NodePool {
	np := &karpenter.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: karpenter.NodePoolSpec{
		Template: karpenter.NodeClaimTemplate{Spec: karpenter.NodeClaimTemplateSpec{
			Requirements: []karpenter.NodeSelectorRequirementWithMinValues{
				req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, types...),
				req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpenter.CapacityTypeOnDemand),
				req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zone),
			},
			NodeClassRef: &karpenter.NodeClassReference{Group: karpenter.AWSGroup, Kind: karpenter.NodeClassKind, Name: "default"},
		}},
		Disruption: karpenter.Disruption{ConsolidationPolicy: policy, ConsolidateAfter: karpenter.NewDuration(after)},
	}}
	for _, o := range opts {
		o(np)
	}
	return np
}

func budgets(bs ...karpenter.Budget) poolOpt {
	return func(np *karpenter.NodePool) { np.Spec.Disruption.Budgets = bs }
}

func testClass() *karpenter.EC2NodeClass {
	fam := karpenter.AMIFamilyAL2023
	return &karpenter.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: karpenter.EC2NodeClassSpec{
		AMIFamily:                  &fam,
		AMISelectorTerms:           []karpenter.AMISelectorTerm{{Alias: "al2023@latest"}},
		Role:                       "KarpenterNodeRole-test",
		SubnetSelectorTerms:        []karpenter.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
		SecurityGroupSelectorTerms: []karpenter.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
	}}
}

// cluster builds a snapshot node by node.
type cluster struct {
	t      testing.TB
	snap   *packer.Snapshot
	claims []*karpenter.NodeClaim
	pdbs   []*policyv1.PodDisruptionBudget
	opts   Options
}

func newCluster(t testing.TB, pools ...*karpenter.NodePool) *cluster {
	return &cluster{t: t, snap: &packer.Snapshot{NodePools: pools, NodeClasses: []*karpenter.EC2NodeClass{testClass()},
		Catalog: catalog.Embedded()}}
}

func (c *cluster) pool(name string) *karpenter.NodePool {
	for _, np := range c.snap.NodePools {
		if np.Name == name {
			return np
		}
	}
	c.t.Fatalf("no pool %s", name)
	return nil
}

// managed adds a node Joiner launched (with an initialized NodeClaim) and its pods.
func (c *cluster) managed(name, pool, instanceType string, age time.Duration, pods ...*corev1.Pod) (*corev1.Node, *karpenter.NodeClaim) {
	n := c.node(name, pool, instanceType, age, pods...)
	nc := &karpenter.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-claim", CreationTimestamp: ago(age),
			Labels: map[string]string{karpenter.NodePoolLabelKey: pool, corev1.LabelInstanceTypeStable: instanceType}},
		Spec: karpenter.NodeClaimSpec{NodeClassRef: &karpenter.NodeClassReference{Group: karpenter.AWSGroup, Kind: karpenter.NodeClassKind, Name: "default"}},
		Status: karpenter.NodeClaimStatus{NodeName: name, ProviderID: n.Spec.ProviderID, ImageID: "ami-current",
			Conditions: []metav1.Condition{
				{Type: karpenter.ConditionLaunched, Status: metav1.ConditionTrue, LastTransitionTime: ago(age)},
				{Type: karpenter.ConditionRegistered, Status: metav1.ConditionTrue, LastTransitionTime: ago(age)},
				{Type: karpenter.ConditionInitialized, Status: metav1.ConditionTrue, LastTransitionTime: ago(age)},
			}},
	}
	c.claims = append(c.claims, nc)
	return n, nc
}

// node adds a node without a NodeClaim.
func (c *cluster) node(name, pool, instanceType string, age time.Duration, pods ...*corev1.Pod) *corev1.Node {
	it, ok := catalog.Embedded().Lookup(instanceType)
	if !ok {
		c.t.Fatalf("no instance type %s", instanceType)
	}
	var off catalog.Offering
	for _, o := range it.Offerings {
		if o.Zone == zone && o.CapacityType == karpenter.CapacityTypeOnDemand {
			off = o
		}
	}
	l := catalog.Labels(it, off)
	l[corev1.LabelHostname] = name
	if pool != "" {
		l[karpenter.NodePoolLabelKey] = pool
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, CreationTimestamp: ago(age)},
		Spec:       corev1.NodeSpec{ProviderID: fmt.Sprintf("aws:///%s/i-%s", zone, name)},
		Status: corev1.NodeStatus{
			Capacity:    catalog.Capacity(it),
			Allocatable: catalog.Allocatable(it, catalog.OverheadFor(testClass())),
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, p := range pods {
		p.Spec.NodeName = name
		p.Status.Phase = corev1.PodRunning
	}
	c.snap.Nodes = append(c.snap.Nodes, packer.NodeState{Node: n, Pods: pods})
	return n
}

func (c *cluster) pdb(name string, allowed int32, match map[string]string) {
	one := intstr.FromInt32(1)
	c.pdbs = append(c.pdbs, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: match}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	})
}

func (c *cluster) input() Input {
	return Input{Now: now, Snapshot: c.snap, NodeClaims: c.claims, PDBs: c.pdbs, Options: c.opts}
}

func (c *cluster) decide() Decision { return Decide(c.input()) }

type podOpt func(*corev1.Pod)

func withLabels(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func annotated(k, v string) podOpt {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

func selecting(k, v string) podOpt {
	return func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{k: v} }
}

// appPod is a ReplicaSet pod created an hour ago.
func appPod(name, cpu, mem string, opts ...podOpt) *corev1.Pod {
	yes := true
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name},
			CreationTimestamp: ago(time.Hour),
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name + "-rs", Controller: &yes}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// dsPod is a DaemonSet pod: it never keeps a node busy.
func dsPod(node string) *corev1.Pod {
	yes := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy-" + node, Namespace: "kube-system", CreationTimestamp: ago(time.Minute),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "kube-proxy", Controller: &yes}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "p", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}}}},
	}
}

// pendingPod is unscheduled, as the scheduler leaves it.
func pendingPod(name, cpu, mem string) *corev1.Pod {
	p := appPod(name, cpu, mem)
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	return p
}

// disruptions are the Delete and Replace actions, as "Kind/Reason/node".
func disruptions(d Decision) []string {
	var out []string
	for _, a := range d.Actions {
		if a.Kind == Delete || a.Kind == Replace {
			out = append(out, fmt.Sprintf("%s/%s/%s", a.Kind, a.Reason, a.Node))
		}
	}
	return out
}

func kinds(d Decision, k ActionKind) []Action {
	var out []Action
	for _, a := range d.Actions {
		if a.Kind == k {
			out = append(out, a)
		}
	}
	return out
}

func blockedFor(d Decision, node string) *Blocked {
	for i := range d.Blocked {
		if d.Blocked[i].Node == node {
			return &d.Blocked[i]
		}
	}
	return nil
}

func equalStrings(a, b []string) bool {
	return strings.Join(a, "\n") == strings.Join(b, "\n")
}

func dump(d Decision) string {
	var b strings.Builder
	for _, a := range d.Actions {
		fmt.Fprintf(&b, "  action %s %s %s cmd=%d save=%.4f: %s\n", a.Kind, a.Reason, a.Node, a.Command, a.SavingsPerHour, a.Explanation)
		if a.Replacement != nil {
			fmt.Fprintf(&b, "    replacement %s %s $%.4f options %v pods %v\n", a.Replacement.CapacityType, a.Replacement.InstanceType,
				a.Replacement.PricePerHour, a.Replacement.Options, a.Replacement.Pods)
		}
	}
	for _, x := range d.Blocked {
		fmt.Fprintf(&b, "  blocked %s %s: %s\n", x.Node, x.Code, x.Reason)
	}
	for _, w := range d.Warnings {
		fmt.Fprintf(&b, "  warning %s\n", w)
	}
	fmt.Fprintf(&b, "  summary %s\n", d.Summary)
	return b.String()
}
