package packer_test

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/packer/workload"
)

// sameAsEncodingJSON requires WriteJSON to write exactly what json.Encoder writes.
func sameAsEncodingJSON(t *testing.T, name string, plan *packer.Plan) {
	t.Helper()
	var want, got bytes.Buffer
	if err := json.NewEncoder(&want).Encode(plan); err != nil {
		t.Fatalf("%s: encoding/json: %v", name, err)
	}
	if err := plan.WriteJSON(&got); err != nil {
		t.Fatalf("%s: WriteJSON: %v", name, err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		g, w := got.String(), want.String()
		i := 0
		for i < len(g) && i < len(w) && g[i] == w[i] {
			i++
		}
		t.Fatalf("%s: WriteJSON differs from encoding/json at byte %d:\ngot  …%.200s\nwant …%.200s", name, i, g[max(0, i-40):], w[max(0, i-40):])
	}
}

func TestWriteJSONMatchesEncodingJSON(t *testing.T) {
	two := 2
	shared := map[string]string{"b": "2", "a": "<&>", "z": "\u2028\u2029\x00\x1f\t\n\"\\é\xff"}
	sameAsEncodingJSON(t, "empty", &packer.Plan{})
	sameAsEncodingJSON(t, "by hand", &packer.Plan{
		Region: "us-east-1",
		NewNodes: []packer.NewNode{{
			Name: "a-1", NodePool: "a", InstanceType: "m6i.large", CapacityType: "spot", Zone: "us-east-1a", PricePerHour: 0.0357,
			Options: []string{"m6i.large", "m5.large"}, Labels: shared, Allocatable: map[string]string{"cpu": "1930m"},
			Taints: []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &metav1.Time{}}},
			Pods:   []string{"default/x"}, Explain: "why <not>",
			Requirements: []karpenter.NodeSelectorRequirementWithMinValues{{Key: "k", Operator: "In", Values: []string{"v"}, MinValues: &two}, {Key: "e", Operator: "Exists"}},
		}, {Name: "a-2", Labels: shared, PricePerHour: 1e-7, Options: []string{}}, {Name: "a-3", PricePerHour: 1e21}},
		ExistingNodes:     []packer.ExistingNode{{Name: "n", InFlight: true, Pods: []string{"a/b"}}, {Name: "m"}},
		Unschedulable:     []packer.Unschedulable{{Pod: "a/c", Reason: "no room"}},
		TotalPricePerHour: 123.456789,
	})
	var bad bytes.Buffer
	if err := (&packer.Plan{TotalPricePerHour: math.NaN()}).WriteJSON(&bad); err == nil {
		t.Error("WriteJSON wrote a NaN price without an error")
	}
	for seed := int64(1); seed <= 40; seed++ {
		snap := workload.Random(seed, 60)
		sameAsEncodingJSON(t, "random", packer.Solve(snap, packer.Options{Explain: seed%2 == 0}))
	}
}
