package handlers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
)

// TestNominatedEventsPerPodThenPerNodeClaim: a small batch gets one Nominated Event
// per pod, as Karpenter writes them; past perPodNominations each NodeClaim's one
// Launched Event names its pods, within an Event note's size.
func TestNominatedEventsPerPodThenPerNodeClaim(t *testing.T) {
	sim := startSim(t)
	crs := poolObjects(t)
	for _, n := range []int{5, 300} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			pods := benchPods("bench", n)
			objs := make([]runtime.Object, 0, len(pods))
			for _, p := range pods {
				objs = append(objs, p)
			}
			cs, clients := fakeCluster(objs, crs)
			fn := benchFunction(t, sim, func() *kube.Clients { return clients }, false)
			s := mustDeliver(t, fn, pendingPodsEvent(t, pods))
			if len(s.NodesLaunched) == 0 || len(s.Errors) > 0 || s.PodsPending != n {
				t.Fatalf("summary %+v", s)
			}
			list, err := cs.EventsV1().Events("").List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			perPod, launched := map[string]bool{}, map[string]string{}
			for _, e := range list.Items {
				switch {
				case e.Reason == kube.ReasonNominated && e.Regarding.Kind == "Pod":
					perPod[e.Regarding.Name] = true
				case e.Reason == kube.ReasonNominated:
					t.Errorf("Nominated Event on a %s", e.Regarding.Kind)
				case e.Reason == kube.ReasonLaunched && e.Regarding.Kind == karpenter.NodeClaimKind:
					launched[e.Regarding.Name] = e.Note
				}
			}
			if len(launched) != len(s.NodesLaunched) {
				t.Errorf("%d Launched Events for %d NodeClaims", len(launched), len(s.NodesLaunched))
			}
			if n <= perPodNominations {
				if len(perPod) != n {
					t.Errorf("%d pods: %d per-pod Nominated Events, want one per pod", n, len(perPod))
				}
				for claim, note := range launched {
					if strings.Contains(note, "bench/app-") {
						t.Errorf("NodeClaim %s's Launched Event names pods although each pod has its own: %s", claim, note)
					}
				}
				return
			}
			if len(perPod) != 0 {
				t.Errorf("%d pods: %d per-pod Nominated Events, want none (the Launched Events name them)", n, len(perPod))
			}
			for claim, note := range launched {
				if len(note) > 1000 || !strings.HasPrefix(note, "Launched instance i-") || !strings.Contains(note, "pod(s) should schedule on it: bench/app-") {
					t.Errorf("NodeClaim %s note (%d bytes): %s", claim, len(note), note)
				}
			}
		})
	}
}
