package disruption

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

func TestLeaks(t *testing.T) {
	owned := func(id string, age time.Duration, extra ...string) OwnedInstance {
		tags := map[string]string{"kubernetes.io/cluster/prod": "owned", NodePoolTag: "default"}
		for i := 0; i+1 < len(extra); i += 2 {
			if extra[i+1] == "" {
				delete(tags, extra[i])
				continue
			}
			tags[extra[i]] = extra[i+1]
		}
		return OwnedInstance{ID: id, State: "running", LaunchTime: now.Add(-age), Tags: tags}
	}
	claim := func(name, providerID string, launchedAgo time.Duration, registered bool) *karpenter.NodeClaim {
		nc := &karpenter.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: ago(launchedAgo + time.Second),
			Labels: map[string]string{karpenter.NodePoolLabelKey: "default"}}}
		nc.Status.ProviderID = providerID
		nc.Status.Conditions = []metav1.Condition{{Type: karpenter.ConditionLaunched, Status: metav1.ConditionTrue, LastTransitionTime: ago(launchedAgo)}}
		if registered {
			nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: karpenter.ConditionRegistered, Status: metav1.ConditionTrue})
		}
		return nc
	}
	deleting := claim("leaving", "aws:///us-east-1a/i-0leaving", time.Hour, false)
	deleting.DeletionTimestamp = ptr(ago(time.Minute))

	instances := []OwnedInstance{
		owned("i-0orphan", 10*time.Minute),                                                                   // leaked
		owned("i-0young", 2*time.Minute),                                                                     // launch in flight
		owned("i-0claimed", time.Hour),                                                                       // providerID match
		owned("i-0tagged", time.Hour, NodeClaimTag, "tagged-claim"),                                          // nodeclaim tag match
		owned("i-0gone", time.Hour, NodeClaimTag, "deleted-claim"),                                           // its claim is gone
		owned("i-0other", time.Hour, "kubernetes.io/cluster/prod", "", "kubernetes.io/cluster/dev", "owned"), // other cluster
		owned("i-0shared", time.Hour, "kubernetes.io/cluster/prod", "shared"),                                // not owned
		owned("i-0nopool", time.Hour, NodePoolTag, ""),                                                       // not a pool's
		{ID: "i-0dying", State: "shutting-down", LaunchTime: now.Add(-time.Hour), Tags: owned("x", 0).Tags},
	}
	claims := []*karpenter.NodeClaim{
		claim("claimed", "aws:///us-east-1a/i-0claimed", time.Hour, true),
		claim("tagged-claim", "", time.Minute, false),
		claim("stuck", "aws:///us-east-1b/i-0stuck", 20*time.Minute, false),
		claim("slow", "aws:///us-east-1b/i-0slow", 10*time.Minute, false),
		deleting,
	}
	got := Leaks("prod", instances, claims, now, 0)
	want := []LeakAction{
		{Kind: TerminateInstance, InstanceID: "i-0gone", NodePool: "default"},
		{Kind: TerminateInstance, InstanceID: "i-0orphan", NodePool: "default"},
		{Kind: DeleteNodeClaim, InstanceID: "i-0stuck", NodeClaim: "stuck", NodePool: "default"},
	}
	for i := range got {
		if got[i].Reason == "" {
			t.Errorf("action %d has no reason", i)
		}
		got[i].Reason = ""
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if out := Leaks("", instances, claims, now, 0); len(out) != 0 {
		t.Fatalf("without a cluster name nothing may be terminated, got %+v", out)
	}
	if out := Leaks("prod", instances[:1], nil, now, time.Hour); len(out) != 0 {
		t.Fatalf("a one-hour grace must spare a ten-minute-old instance, got %+v", out)
	}
}
