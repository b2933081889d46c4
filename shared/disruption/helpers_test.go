package disruption

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/testworld"
)

// now is the decision time of every test: a Wednesday, 12:00 UTC.
var now = time.Date(2025, 6, 11, 12, 0, 0, 0, time.UTC)

const zone = testworld.Zone

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

// The fixtures are shared/testworld's; these names keep the tests short.

var req = testworld.Req

type poolOpt = testworld.PoolOption

// testPool is an on-demand pool in one zone limited to types.
func testPool(name string, policy karpenter.ConsolidationPolicy, after time.Duration, types []string, opts ...poolOpt) *karpenter.NodePool {
	return testworld.Pool(name, policy, after, types, opts...)
}

var (
	budgets   = testworld.Budgets
	testClass = testworld.Class
)

// cluster is a testworld at now with the options of the decision.
type cluster struct {
	*testworld.World
	opts Options
}

func newCluster(t testing.TB, pools ...*karpenter.NodePool) *cluster {
	return &cluster{World: testworld.New(t, now, pools...)}
}

func (c *cluster) pool(name string) *karpenter.NodePool { return c.Pool(name) }

// managed adds a node Joiner launched (with an initialized NodeClaim) and its pods.
func (c *cluster) managed(name, pool, instanceType string, age time.Duration, pods ...*corev1.Pod) (*corev1.Node, *karpenter.NodeClaim) {
	return c.Managed(name, pool, instanceType, age, pods...)
}

// node adds a node without a NodeClaim.
func (c *cluster) node(name, pool, instanceType string, age time.Duration, pods ...*corev1.Pod) *corev1.Node {
	return c.Node(name, pool, instanceType, age, pods...)
}

func (c *cluster) pdb(name string, allowed int32, match map[string]string) {
	c.PDB(name, allowed, match)
}

func (c *cluster) input() Input {
	return Input{Now: now, Snapshot: c.Snapshot, NodeClaims: c.NodeClaims, PDBs: c.PDBs, Options: c.opts}
}

func (c *cluster) decide() Decision { return Decide(c.input()) }

type podOpt = testworld.PodOption

var (
	withLabels = testworld.Labels
	annotated  = testworld.Annotated
	selecting  = testworld.Selecting
)

// appPod is a ReplicaSet pod created an hour ago.
func appPod(name, cpu, mem string, opts ...podOpt) *corev1.Pod {
	return testworld.AppPod(now, name, cpu, mem, opts...)
}

// dsPod is a DaemonSet pod: it never keeps a node busy.
func dsPod(node string) *corev1.Pod { return testworld.DaemonSetPod(now, node) }

// pendingPod is unscheduled, as the scheduler leaves it.
func pendingPod(name, cpu, mem string) *corev1.Pod { return testworld.PendingPod(now, name, cpu, mem) }

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
