package handlers

import (
	"context"
	"errors"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// profilesCloud records the live classes the consolidator passes and answers
// with deleted profiles or an error.
type profilesCloud struct {
	Cloud
	live    *[]string
	deleted []string
	err     error
}

func (c profilesCloud) CollectInstanceProfiles(_ context.Context, live []string) ([]string, error) {
	*c.live = slices.Clone(live)
	return c.deleted, c.err
}

// TestConsolidatorCollectsProfilesOfDeletedClasses: the round tells the cloud
// which EC2NodeClasses exist (shared/cloud deletes the profiles of the others
// once no instance holds them: TestCollectInstanceProfilesOfDeletedClasses on
// awssim and moto) and reports what went; an IAM failure is logged, not the
// round's.
func TestConsolidatorCollectsProfilesOfDeletedClasses(t *testing.T) {
	st := &kube.ClusterState{Snapshot: packer.Snapshot{NodeClasses: []*karpenter.EC2NodeClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, {ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}}}}
	var live []string
	d := &Deps{Log: quietLog(), Cloud: profilesCloud{live: &live, deleted: []string{"c_123"}}}
	got := d.collectProfiles(context.Background(), st)
	if !slices.Equal(live, []string{"default", "gpu"}) {
		t.Errorf("live classes %v, want default and gpu", live)
	}
	if !slices.Equal(got, []string{"deleted instance profile c_123 of a deleted EC2NodeClass"}) {
		t.Errorf("reported %q", got)
	}
	d.Cloud = profilesCloud{live: &live, err: errors.New("AccessDenied: iam:ListInstanceProfiles")}
	if got := d.collectProfiles(context.Background(), st); len(got) != 0 {
		t.Errorf("a failed collection reported %q", got)
	}
}
