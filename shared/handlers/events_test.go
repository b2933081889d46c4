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
// per pod, as Karpenter writes them; past perPodNominations each NodeClaim gets one
// naming its pods, within an Event note's size.
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
			perPod, perClaim := map[string]bool{}, map[string]string{}
			for _, e := range list.Items {
				if e.Reason != kube.ReasonNominated {
					continue
				}
				switch e.Regarding.Kind {
				case "Pod":
					perPod[e.Regarding.Name] = true
				case karpenter.NodeClaimKind:
					perClaim[e.Regarding.Name] = e.Note
				}
			}
			if n <= perPodNominations {
				if len(perPod) != n || len(perClaim) != 0 {
					t.Errorf("%d pods: %d per-pod and %d per-NodeClaim Nominated Events, want %d per pod", n, len(perPod), len(perClaim), n)
				}
				return
			}
			if len(perPod) != 0 || len(perClaim) != len(s.NodesLaunched) {
				t.Errorf("%d pods: %d per-pod and %d per-NodeClaim Nominated Events, want one per NodeClaim (%d)", n, len(perPod), len(perClaim), len(s.NodesLaunched))
			}
			for claim, note := range perClaim {
				if len(note) > 1000 || !strings.Contains(note, "nodeclaim/"+claim) || !strings.Contains(note, "bench/app-") {
					t.Errorf("NodeClaim %s note (%d bytes): %s", claim, len(note), note)
				}
			}
		})
	}
}

// TestNominationNoteFitsAnEvent: the note names as many pods as fit in 1 kB and
// counts the rest.
func TestNominationNoteFitsAnEvent(t *testing.T) {
	var pods []string
	for i := 0; i < 200; i++ {
		pods = append(pods, fmt.Sprintf("default/web-%03d", i))
	}
	note := nominationNote("nodeclaim/default-abcde (spot m6g.large in us-east-1a)", pods)
	if len(note) > 1000 || !strings.HasPrefix(note, "200 pod(s) should schedule on: nodeclaim/default-abcde") || !strings.Contains(note, " default/web-000 ") {
		t.Fatalf("note (%d bytes): %s", len(note), note)
	}
	named := strings.Count(note, "default/web-")
	if !strings.HasSuffix(note, fmt.Sprintf(" and %d more", 200-named)) {
		t.Errorf("note names %d pods but ends %q", named, note[len(note)-20:])
	}
	if short := nominationNote("nodeclaim/x", pods[:2]); short != "2 pod(s) should schedule on: nodeclaim/x: default/web-000 default/web-001" {
		t.Errorf("short note %q", short)
	}
}
