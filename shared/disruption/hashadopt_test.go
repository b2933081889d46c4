package disruption

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// karpenterClaim is a NodeClaim as Karpenter v1.15 writes it: its own hashes, under
// its own hash versions.
func karpenterClaim(name string, conds ...metav1.Condition) *karpenter.NodeClaim {
	return &karpenter.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpenter.NodePoolLabelKey: "default"},
			Annotations: map[string]string{NodePoolHashAnnotation: "6821555240594823858", NodePoolHashVersionAnnotation: "v3",
				NodeClassHashAnnotation: "13155185423470328150", NodeClassHashVersionAnnotation: "v6"}},
		Spec:   karpenter.NodeClaimSpec{NodeClassRef: &karpenter.NodeClassReference{Group: karpenter.AWSGroup, Kind: karpenter.NodeClassKind, Name: "default"}},
		Status: karpenter.NodeClaimStatus{Conditions: conds},
	}
}

func TestHashStampsAdoptKarpenterClaims(t *testing.T) {
	np := testPool("default", karpenter.ConsolidationPolicyWhenEmptyOrUnderutilized, 0, []string{"m6a.large"})
	np.Annotations = map[string]string{NodePoolHashAnnotation: "6821555240594823858", NodePoolHashVersionAnnotation: "v3"}
	class := testClass()
	class.Annotations = map[string]string{NodeClassHashAnnotation: "13155185423470328150", NodeClassHashVersionAnnotation: "v6"}
	drifted := metav1.Condition{Type: karpenter.ConditionDrifted, Status: metav1.ConditionTrue, Reason: "RequirementsDrifted"}
	deleting := karpenterClaim("deleting")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	other := karpenterClaim("other-pool")
	other.Labels[karpenter.NodePoolLabelKey] = "gpu"
	other.Spec.NodeClassRef.Name = "gpu"
	claims := []*karpenter.NodeClaim{karpenterClaim("fine"), karpenterClaim("drifted", drifted), deleting, other}

	got := HashStamps([]*karpenter.NodePool{np}, []*karpenter.EC2NodeClass{class}, claims)
	ph, ch := NodePoolHash(np), NodeClassHash(class)
	want := []HashStamp{
		// Karpenter found it drifted: only the versions move, so it stays drifted.
		{Kind: karpenter.NodeClaimKind, Name: "drifted", Annotations: map[string]string{NodePoolHashVersionAnnotation: HashVersion, NodeClassHashVersionAnnotation: HashVersion}},
		{Kind: karpenter.NodeClaimKind, Name: "fine", Annotations: map[string]string{NodePoolHashAnnotation: ph, NodePoolHashVersionAnnotation: HashVersion,
			NodeClassHashAnnotation: ch, NodeClassHashVersionAnnotation: HashVersion}},
		{Kind: karpenter.NodePoolKind, Name: "default", Annotations: map[string]string{NodePoolHashAnnotation: ph, NodePoolHashVersionAnnotation: HashVersion}},
		{Kind: karpenter.NodeClassKind, Name: "default", Annotations: map[string]string{NodeClassHashAnnotation: ch, NodeClassHashVersionAnnotation: HashVersion}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("stamps:\n got %+v\nwant %+v", got, want)
	}

	// Applied, the adopted claim is not drifted and the drifted one is; the round
	// after has nothing to stamp.
	apply := func(stamps []HashStamp) {
		for _, s := range stamps {
			var m *metav1.ObjectMeta
			switch s.Kind {
			case karpenter.NodePoolKind:
				m = &np.ObjectMeta
			case karpenter.NodeClassKind:
				m = &class.ObjectMeta
			default:
				for _, nc := range claims {
					if nc.Name == s.Name {
						m = &nc.ObjectMeta
					}
				}
			}
			for k, v := range s.Annotations {
				m.Annotations[k] = v
			}
		}
	}
	apply(got)
	if again := HashStamps([]*karpenter.NodePool{np}, []*karpenter.EC2NodeClass{class}, claims); len(again) != 0 {
		t.Fatalf("second round stamps %+v", again)
	}
	s := &state{opts: Options{}.withDefaults()}
	fine := &nodeInfo{state: &corev1.Node{}, claim: claims[0], pool: np}
	s.classes = map[string]*karpenter.EC2NodeClass{"default": class}
	if why := s.driftReason(fine); why != "" {
		t.Errorf("adopted claim drifted: %s", why)
	}
	if why := s.driftReason(&nodeInfo{state: &corev1.Node{}, claim: claims[1], pool: np}); why == "" {
		t.Error("Karpenter's drifted claim is not drifted")
	}

	// A later change of the NodePool's template stamps the pool only, and drifts the
	// adopted claim as one of Joiner's own.
	np.Spec.Template.Spec.Taints = append(np.Spec.Template.Spec.Taints, corev1.Taint{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule})
	later := HashStamps([]*karpenter.NodePool{np}, []*karpenter.EC2NodeClass{class}, claims)
	if len(later) != 1 || later[0].Kind != karpenter.NodePoolKind {
		t.Fatalf("after a template change: %+v, want the NodePool's stamp only", later)
	}
	if why := s.driftReason(fine); why == "" {
		t.Error("template change did not drift the adopted claim")
	}
}
