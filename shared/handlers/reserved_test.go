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
// other zone); any other node launches in its planned zone and capacity type
// first, then in the others its requirements (its NodeClaim's) allow, never
// into a reservation. A node launched into a reservation carries
// karpenter.sh/capacity-type=reserved and Karpenter's reservation labels.
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
	// planned is a node as the engine writes it: planned in zone as chosen,
	// its requirements allowing zones and capacity types.
	planned := func(zone, chosen string, zones, cts []string) *packer.NewNode {
		return &packer.NewNode{NodePool: "training", InstanceType: "m6i.large", CapacityType: chosen, Zone: zone, Options: []string{"m6i.large"},
			Requirements: []karpenter.NodeSelectorRequirementWithMinValues{
				{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: zones},
				{Key: karpenter.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: cts}}}
	}
	all := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	for _, c := range []struct {
		name            string
		nn              *packer.NewNode
		zones, fallback []string
		cts             []string
	}{
		{"planned spot beside a reservation", planned("us-east-1b", "spot", all, []string{"spot", "on-demand"}),
			[]string{"us-east-1b"}, []string{"us-east-1a", "us-east-1c"}, []string{"spot", "on-demand"}},
		{"planned on-demand, its zone pinned", planned("us-east-1b", "on-demand", []string{"us-east-1b"}, []string{"on-demand"}),
			[]string{"us-east-1b"}, nil, []string{"on-demand"}},
		{"spot only, two zones", planned("us-east-1b", "spot", []string{"us-east-1a", "us-east-1b"}, []string{"spot"}),
			[]string{"us-east-1b"}, []string{"us-east-1a"}, []string{"spot"}},
	} {
		req := launchRequest(pool("reserved", "spot", "on-demand"), withTerms, c.nn)
		if !slices.Equal(req.Zones, c.zones) || !slices.Equal(req.FallbackZones, c.fallback) || req.FallbackAnyZone ||
			!slices.Equal(req.CapacityTypes, c.cts) || req.CapacityReservationID != "" {
			t.Errorf("%s: zones %v then %v (any %v), capacity types %v, reservation %q; want %v then %v, %v", c.name,
				req.Zones, req.FallbackZones, req.FallbackAnyZone, req.CapacityTypes, req.CapacityReservationID, c.zones, c.fallback, c.cts)
		}
		if claim := nodeClaimFor(pool("spot", "on-demand"), withTerms, c.nn); !reflect.DeepEqual(claim.Spec.Requirements, c.nn.Requirements) {
			t.Errorf("%s: NodeClaim requirements %v, want the node's %v", c.name, claim.Spec.Requirements, c.nn.Requirements)
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
