package replay

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"

	"k8s.io/client-go/kubernetes"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
)

// realSchedulerScenarios are the scenarios TestScenariosRealScheduler replays
// with kube-scheduler binding.
var realSchedulerScenarios = []string{"001-heavy-app", "002-cpu-gpu", "004-nodeless", "010-spot-storm", "014-pdb-blocked-drain", "016-burst-5000"}

// TestScenariosRealScheduler replays scenarios on a real kube-apiserver where
// only a real kube-scheduler (default profile) binds pods: the simulation
// registers Nodes as kubelets do (karpenter.sh/unregistered and startup taints,
// NotReady for settings.readyAfter, GPUs advertised settings.devicePluginAfter
// after Ready) and KWOK keeps their heartbeats. Every expectation must hold as it
// does when Joiner's own simulation binds; the table compares each scenario's
// nodes launched with the same replay in memory (Joiner's plans executed as
// planned) and counts the pods kube-scheduler bound to a node other than the one
// Joiner nominated. The 5,000-pod burst may launch at most 5% more nodes, and
// scenario 002 exactly one GPU node although its GPU shows up late.
func TestScenariosRealScheduler(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver, kube-scheduler and KWOK")
	}
	s := kubetest.StartScheduling(t, kubetest.KWOKOptions{})
	scenarios, err := LoadAll("../../testdata/scenarios", realSchedulerScenarios...)
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.Embedded()
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tnodes (real scheduler)\tnodes (as planned)\tpods bound\tbound elsewhere than nominated\texpectations\twall")
	for _, sc := range scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			ctx := context.Background()
			planned, err := Run(ctx, sc, Options{})
			if err != nil {
				t.Fatalf("in memory: %v", err)
			}
			var steps strings.Builder
			res, err := Run(ctx, sc, Options{Steps: &steps, Server: s.Config, RealScheduler: true, Settle: s.SettleOnChange(kubernetes.NewForConfigOrDie(s.Config)),
				NodeAnnotations: map[string]string{kubetest.KWOKAnnotation: "fake"}})
			if err != nil {
				t.Fatalf("%v\n%s", err, steps.String())
			}
			for _, o := range res.Expectations {
				if !o.Met {
					t.Errorf("expectation not met: %s: %s", o.Check, o.Detail)
				}
			}
			if res.Scheduler != SchedulerReal || res.Bound == 0 {
				t.Errorf("kube-scheduler bound nothing (scheduler %q, %d bound)", res.Scheduler, res.Bound)
			}
			got, want := res.NodesLaunched(), planned.NodesLaunched()
			switch sc.Name {
			case "016-burst-5000":
				if float64(got) > 1.05*float64(want) {
					t.Errorf("%d nodes launched, more than 5%% over the %d planned", got, want)
				}
			case "002-cpu-gpu":
				if n := gpuNodes(cat, res.Launched); n != 1 {
					t.Errorf("%d GPU nodes launched, want exactly 1 (launched %v)", n, res.Launched)
				}
			}
			met := len(res.Expectations) - res.Failed
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d of %d\t%s\n", sc.Name, got, want, res.Bound, res.Elsewhere, met, len(res.Expectations), res.Wall.Round(1e9))
			if t.Failed() || testing.Verbose() {
				var sum strings.Builder
				WriteSummary(&sum, res)
				t.Logf("steps:\n%s%s", steps.String(), sum.String())
			}
		})
	}
	tw.Flush()
	t.Logf("kube-scheduler v1.37 (default profile) binding Joiner's plans:\n%s", table.String())
}

// gpuNodes counts the instances launched of types with a GPU.
func gpuNodes(cat *catalog.Catalog, launched []Count) int {
	n := 0
	for _, c := range launched {
		if it, ok := cat.Lookup(c.Type); ok && it.GPU != nil {
			n += c.Count
		}
	}
	return n
}
