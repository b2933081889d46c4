package handlers

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/cloud"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// TestReservedCapacityRequestedAndLabelled: a node the plan put in a capacity
// reservation launches into that reservation only (no other capacity type, no
// other zone); any other node launches as before, spot falling back to
// on-demand where the pool allows it, never into a reservation. A node
// launched into a reservation carries karpenter.sh/capacity-type=reserved and
// Karpenter's reservation labels.
func TestReservedCapacityRequestedAndLabelled(t *testing.T) {
	pool := func(cts ...string) *karpenter.NodePool {
		np := &karpenter.NodePool{}
		np.Name = "training"
		np.Spec.Template.Spec.Requirements = []karpenter.NodeSelectorRequirementWithMinValues{{
			Key: karpenter.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: cts}}
		return np
	}
	withTerms := &karpenter.EC2NodeClass{}
	withTerms.Spec.CapacityReservationSelectorTerms = []karpenter.CapacityReservationSelectorTerm{{Tags: map[string]string{"purpose": "training"}}}
	for _, c := range []struct {
		name   string
		pool   *karpenter.NodePool
		chosen string
		want   []string
	}{
		{"planned in a reservation", pool("reserved", "spot", "on-demand"), "reserved", []string{"reserved"}},
		{"planned spot beside a reservation", pool("reserved", "spot", "on-demand"), "spot", []string{"spot", "on-demand"}},
		{"planned on-demand", pool("reserved", "on-demand"), "on-demand", []string{"on-demand"}},
		{"spot only", pool("spot"), "spot", []string{"spot"}},
	} {
		if got := capacityTypes(c.pool, c.chosen); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	nn := &packer.NewNode{NodePool: "training", InstanceType: "p5.48xlarge", CapacityType: "reserved", CapacityReservationID: "cr-0a1b2c3d4e5f60718",
		Zone: "us-east-1b", Options: []string{"p5.48xlarge"}}
	req := launchRequest(pool("reserved", "on-demand"), withTerms, nn)
	if req.CapacityReservationID != nn.CapacityReservationID || !slices.Equal(req.CapacityTypes, []string{"reserved"}) ||
		!slices.Equal(req.Zones, []string{"us-east-1b"}) || len(req.FallbackZones) > 0 || req.FallbackAnyZone {
		t.Errorf("launch request %+v: want reservation %s only, in us-east-1b only", req, nn.CapacityReservationID)
	}

	inst := cloud.Instance{ID: "i-0123456789abcdef0", ProviderID: "aws:///us-east-1b/i-0123456789abcdef0", InstanceType: "p5.48xlarge", Zone: "us-east-1b",
		CapacityType: karpenter.CapacityTypeReserved, CapacityReservationID: "cr-0a1b2c3d4e5f60718", CapacityReservationType: "default"}
	rec, _ := launchRecord(catalog.Embedded(), withTerms, &packer.NewNode{PricePerHour: 1}, inst)
	if rec.CapacityType != karpenter.CapacityTypeReserved || rec.Labels[karpenter.LabelCapacityReservationID] != "cr-0a1b2c3d4e5f60718" ||
		rec.Labels[karpenter.LabelCapacityReservationType] != "default" {
		t.Errorf("launch record %+v: want capacity type reserved and the reservation's id and type labels", rec)
	}
}

// reservationsCloud answers CapacityReservations per class; a class named in
// fail answers an error.
type reservationsCloud struct {
	Cloud
	byClass     map[string][]cloud.CapacityReservation
	fail        string
	unavailable *cloud.UnavailableOfferings
}

func (c reservationsCloud) CapacityReservations(_ context.Context, nc *karpenter.EC2NodeClass) ([]cloud.CapacityReservation, error) {
	if nc.Name == c.fail {
		return nil, errors.New("UnauthorizedOperation: not allowed to describe capacity reservations")
	}
	return c.byClass[nc.Name], nil
}
func (c reservationsCloud) Unavailable() *cloud.UnavailableOfferings { return c.unavailable }

// TestWithReservationsPlansReservedCapacity: before it plans, the provisioner
// asks EC2 (not the classes' status) which reservations each class selects and
// how many instances they take; a reservation two classes select is one
// offering of both; one a launch found full is left out; a class whose
// reservations cannot be read plans without them. The plan then puts p5
// training pods into the p5 reservation's slots and the rest on-demand.
func TestWithReservationsPlansReservedCapacity(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	unavailable := cloud.NewUnavailableOfferings(func() time.Time { return now })
	class := func(name string) *karpenter.EC2NodeClass {
		nc := &karpenter.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
		nc.Spec.CapacityReservationSelectorTerms = []karpenter.CapacityReservationSelectorTerm{{Tags: map[string]string{"purpose": "training"}}}
		// A status another controller left: never read for the plan.
		nc.Status.CapacityReservations = []karpenter.CapacityReservation{{ID: "cr-0ffffffffffffffff", InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1a"}}
		return nc
	}
	p5 := cloud.CapacityReservation{ID: "cr-0a1b2c3d4e5f60718", InstanceType: "p5.48xlarge", Zone: "us-east-1b", Type: "default", Available: 2, Total: 2}
	full := cloud.CapacityReservation{ID: "cr-0b1b2c3d4e5f60718", InstanceType: "p4d.24xlarge", Zone: "us-east-1a", Type: "default", Available: 1, Total: 1}
	unavailable.MarkUnavailable(full.InstanceType, full.Zone, cloud.ReservedCapacityType(full.ID))
	d := &Deps{Log: quietLog(), Cloud: reservationsCloud{unavailable: unavailable, fail: "broken",
		byClass: map[string][]cloud.CapacityReservation{"training": {p5, full}, "training-b": {p5}}}}
	classes := []*karpenter.EC2NodeClass{class("training"), class("training-b"), class("broken"), {ObjectMeta: metav1.ObjectMeta{Name: "plain"}}}
	got := d.reservations(context.Background(), classes)
	want := []packer.Reservation{{ID: p5.ID, InstanceType: "p5.48xlarge", Zone: "us-east-1b", Type: "default", Available: 2, NodeClasses: []string{"training", "training-b"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("reservations %+v, want %+v", got, want)
	}

	pool := &karpenter.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "training"}}
	pool.Spec.Template.Spec.NodeClassRef = &karpenter.NodeClassReference{Group: karpenter.AWSGroup, Kind: karpenter.NodeClassKind, Name: "training"}
	pool.Spec.Template.Spec.Requirements = []karpenter.NodeSelectorRequirementWithMinValues{
		{Key: karpenter.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"reserved", "on-demand"}},
		{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"p5.48xlarge", "p4d.24xlarge"}}}
	var pods []*corev1.Pod
	for i := range 3 {
		pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("train-%d", i), Namespace: "default"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), karpenter.ResourceNVIDIAGPU: resource.MustParse("8")},
				Limits:   corev1.ResourceList{karpenter.ResourceNVIDIAGPU: resource.MustParse("8")}}}}}})
	}
	plan := packer.Solve(&packer.Snapshot{Pods: pods, NodePools: []*karpenter.NodePool{pool}, NodeClasses: classes[:1],
		Catalog: catalog.Embedded(), Reservations: got}, packer.Options{})
	var kinds []string
	for _, n := range plan.NewNodes {
		kinds = append(kinds, n.CapacityType+" "+n.InstanceType+" "+n.Zone+" "+n.CapacityReservationID)
	}
	slices.Sort(kinds)
	wantKinds := []string{"on-demand p4d.24xlarge us-east-1a ", "reserved p5.48xlarge us-east-1b " + p5.ID, "reserved p5.48xlarge us-east-1b " + p5.ID}
	if !slices.Equal(kinds, wantKinds) {
		t.Errorf("plan %q (unschedulable %v), want %q", kinds, plan.Unschedulable, wantKinds)
	}
}
