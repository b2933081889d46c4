package replay

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
	"github.com/joiner-autoscaler/joiner/shared/kubesim"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kubetest.StopShared()
	os.Exit(code)
}

// TestScenariosRealAPIServer replays scenarios against a real kube-apiserver + etcd:
// the same expectations must hold, and the replay must leave the cluster as it found
// it (no Node, NodeClaim, NodePool or pod of the scenario left).
func TestScenariosRealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real kube-apiserver")
	}
	env := kubetest.Shared(t)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	scenarios, err := LoadAll("../../testdata/scenarios", "001-heavy-app", "004-nodeless", "020-adopt-from-karpenter")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			ctx := context.Background()
			var steps strings.Builder
			res, err := Run(ctx, sc, Options{Steps: &steps, Server: env.Config})
			if err != nil {
				t.Fatalf("%v\n%s", err, steps.String())
			}
			for _, o := range res.Expectations {
				if !o.Met {
					t.Errorf("expectation not met: %s: %s", o.Check, o.Detail)
				}
			}
			if res.Launched == nil || res.Pods.Placed == 0 {
				t.Errorf("nothing launched or placed: launched %v, placed %d", res.Launched, res.Pods.Placed)
			}
			if t.Failed() || testing.Verbose() {
				var sum strings.Builder
				WriteSummary(&sum, res)
				t.Logf("steps:\n%s%s", steps.String(), sum.String())
			}
			nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(nodes.Items) != 0 {
				t.Errorf("%d node(s) left after the replay", len(nodes.Items))
			}
			for _, gvr := range []struct {
				name string
				res  dynamic.NamespaceableResourceInterface
			}{{"NodeClaims", dyn.Resource(kube.NodeClaimGVR)}, {"NodePools", dyn.Resource(kube.NodePoolGVR)}, {"EC2NodeClasses", dyn.Resource(kube.NodeClassGVR)}} {
				list, err := gvr.res.List(ctx, metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if len(list.Items) != 0 {
					t.Errorf("%d %s left after the replay", len(list.Items), gvr.name)
				}
			}
			pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(pods.Items) != 0 {
				t.Errorf("%d pod(s) left after the replay, first %s/%s", len(pods.Items), pods.Items[0].Namespace, pods.Items[0].Name)
			}
		})
	}
}

// TestRealAPIServerRefusesNonScratch: a cluster with a Node is refused unless forced.
func TestRealAPIServerRefusesNonScratch(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real kube-apiserver")
	}
	env := kubetest.Shared(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses-node"}}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })
	_, err := kubesim.NewReal(ctx, kubesim.Config{}, env.Config, false)
	if !errors.Is(err, kubesim.ErrNotScratch) || !strings.Contains(err.Error(), "1 nodes") {
		t.Fatalf("want ErrNotScratch naming 1 node, got %v", err)
	}
	c, err := kubesim.NewReal(ctx, kubesim.Config{}, env.Config, true)
	if err != nil {
		t.Fatalf("forced: %v", err)
	}
	if err := c.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("cleanup touched a node it did not create: %v", err)
	}
}
