package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/awslabs/operatorpkg/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakecr "sigs.k8s.io/controller-runtime/pkg/client/fake"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	awshash "github.com/aws/karpenter-provider-aws/pkg/controllers/nodeclass/hash"
	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/fake"
	nodeclaimdisruption "sigs.k8s.io/karpenter/pkg/controllers/nodeclaim/disruption"
	nodepoolhash "sigs.k8s.io/karpenter/pkg/controllers/nodepool/hash"
	"sigs.k8s.io/karpenter/pkg/operator/options"
	"sigs.k8s.io/karpenter/pkg/test"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/disruption"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/manifest"
	"github.com/joiner-autoscaler/joiner/shared/replay"
)

// adoptScenario is the replay whose end state is handed back to Karpenter: a
// cluster Karpenter ran, taken over by Joiner, holding at the end both
// NodeClaims Karpenter launched (re-stamped by Joiner) and NodeClaims Joiner's
// provisioner launched.
const adoptScenario = "../../testdata/scenarios/020-adopt-from-karpenter"

// caBundle stands for the cluster CA that Karpenter's AWS provider folds into
// its EC2NodeClass hash (its API client's): any value will do, as long as the
// same one is used throughout.
var caBundle = new("-----BEGIN CERTIFICATE-----\nMIIB joiner-wayback-test\n-----END CERTIFICATE-----\n")

// TestKarpenterTakesBackJoinersObjects is the way back judged by Karpenter's own
// code (the README's migration guide, step 6). The NodePools, EC2NodeClasses and NodeClaims are those Joiner's
// functions leave in scenario 020's cluster, decoded strictly into Karpenter's
// types; Karpenter's nodepool.hash and the AWS provider's nodeclass.hash
// controllers then run on them as a restarted Karpenter would, and Karpenter's
// nodeclaim.disruption controller judges every NodeClaim. None may be found
// drifted, the NodeClaims must carry Karpenter's hashes afterwards, and a later
// edit of the NodePool or EC2NodeClass must drift them: Joiner's nodes are
// Karpenter's to manage again.
//
// Joiner does not write Karpenter's hashes (see shared/disruption/hashadopt.go):
// it writes its own under its own hash version, which Karpenter's drift check
// never compares with a hash of another version, and which Karpenter's hash
// controllers replace with theirs as they do after one of Karpenter's own hash
// version changes. The test checks that protocol, not equal hash values.
func TestKarpenterTakesBackJoinersObjects(t *testing.T) {
	if testing.Short() {
		t.Skip("replays scenario 020")
	}
	ctx := options.ToContext(context.Background(), test.Options())
	raw, seed := replayAdoption(t, ctx)
	seeded := map[string]bool{}
	for _, nc := range seed.NodeClaims {
		seeded[nc.Name] = true
	}
	// The scenario's cluster is Karpenter's: its NodePool carries the hash
	// Karpenter's own code gives it (the one its NodeClaims were stamped with).
	for _, np := range seed.NodePools {
		// As translate reads them: unset durations are absent, not null or "".
		var doc any
		b, err := json.Marshal(np)
		if err == nil {
			err = json.Unmarshal(b, &doc)
		}
		if err == nil {
			b, err = json.Marshal(dropEmpty(doc))
		}
		if err != nil {
			t.Fatal(err)
		}
		kp := decodeStrict[v1.NodePool](t, b)
		if got, want := np.Annotations[v1.NodePoolHashAnnotationKey], kp.Hash(); got != want || np.Annotations[v1.NodePoolHashVersionAnnotationKey] != v1.NodePoolHashVersion {
			t.Errorf("scenario NodePool %s: %s=%s version %s, Karpenter's hash is %s version %s", np.Name, v1.NodePoolHashAnnotationKey, got,
				np.Annotations[v1.NodePoolHashVersionAnnotationKey], want, v1.NodePoolHashVersion)
		}
	}

	var pools []*v1.NodePool
	var classes []*awsv1.EC2NodeClass
	var claims []*v1.NodeClaim
	joinerPools := map[string]*karpenter.NodePool{}
	joinerClasses := map[string]*karpenter.EC2NodeClass{}
	for _, b := range raw[kube.NodePoolGVR] {
		pools = append(pools, decodeStrict[v1.NodePool](t, b))
		np := decodeStrict[karpenter.NodePool](t, b)
		joinerPools[np.Name] = np
	}
	for _, b := range raw[kube.NodeClassGVR] {
		classes = append(classes, decodeStrict[awsv1.EC2NodeClass](t, b))
		nc := decodeStrict[karpenter.EC2NodeClass](t, b)
		joinerClasses[nc.Name] = nc
	}
	launchedByJoiner := 0
	for _, b := range raw[kube.NodeClaimGVR] {
		nc := decodeStrict[v1.NodeClaim](t, b)
		if !nc.DeletionTimestamp.IsZero() {
			continue
		}
		claims = append(claims, nc)
		if !seeded[nc.Name] {
			launchedByJoiner++
		}
	}
	if len(pools) == 0 || len(classes) == 0 || len(claims) == 0 {
		t.Fatalf("the replay left %d NodePools, %d EC2NodeClasses, %d live NodeClaims", len(pools), len(classes), len(claims))
	}
	if launchedByJoiner == 0 {
		t.Fatal("no NodeClaim the provisioner launched is left to hand back")
	}

	// What Joiner wrote, against Karpenter's own hash functions and versions.
	if disruption.HashVersion == v1.NodePoolHashVersion || disruption.HashVersion == awsv1.EC2NodeClassHashVersion {
		t.Fatalf("Joiner's hash version %q is one of Karpenter's (%s, %s): Karpenter would compare Joiner's hashes with its own and drift every node",
			disruption.HashVersion, v1.NodePoolHashVersion, awsv1.EC2NodeClassHashVersion)
	}
	for _, np := range pools {
		t.Logf("NodePool %s: Joiner wrote hash %s version %s; Karpenter's NodePool.Hash() is %s (version %s)", np.Name,
			np.Annotations[v1.NodePoolHashAnnotationKey], np.Annotations[v1.NodePoolHashVersionAnnotationKey], np.Hash(), v1.NodePoolHashVersion)
		if got, want := np.Annotations[v1.NodePoolHashAnnotationKey], disruption.NodePoolHash(joinerPools[np.Name]); got != want {
			t.Errorf("NodePool %s: hash annotation %s, Joiner's hash of it %s", np.Name, got, want)
		}
	}
	for _, nc := range classes {
		t.Logf("EC2NodeClass %s: Joiner wrote hash %s version %s; the AWS provider's EC2NodeClass.Hash() is %s (version %s)", nc.Name,
			nc.Annotations[awsv1.AnnotationEC2NodeClassHash], nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion], nc.Hash(caBundle), awsv1.EC2NodeClassHashVersion)
	}
	for _, nc := range claims {
		for _, k := range []string{v1.NodePoolHashVersionAnnotationKey, awsv1.AnnotationEC2NodeClassHashVersion} {
			if v := nc.Annotations[k]; v != disruption.HashVersion {
				t.Errorf("NodeClaim %s: %s=%q, want Joiner's %q", nc.Name, k, v, disruption.HashVersion)
			}
		}
	}

	// Karpenter comes back: its hash controllers first reconcile every NodePool and
	// EC2NodeClass (a restart reconciles every object).
	clk := clocktesting.NewFakeClock(latestCreation(claims).Add(2 * time.Hour))
	objs := make([]client.Object, 0, len(pools)+len(classes)+len(claims))
	for _, o := range pools {
		objs = append(objs, o)
	}
	for _, o := range classes {
		objs = append(objs, o)
	}
	for _, o := range claims {
		objs = append(objs, o)
	}
	kc := fakecr.NewClientBuilder().WithObjects(objs...).
		WithStatusSubresource(&v1.NodePool{}, &v1.NodeClaim{}, &awsv1.EC2NodeClass{}).
		WithIndex(&v1.NodeClaim{}, "spec.nodeClassRef.group", func(o client.Object) []string { return []string{o.(*v1.NodeClaim).Spec.NodeClassRef.Group} }).
		WithIndex(&v1.NodeClaim{}, "spec.nodeClassRef.kind", func(o client.Object) []string { return []string{o.(*v1.NodeClaim).Spec.NodeClassRef.Kind} }).
		WithIndex(&v1.NodeClaim{}, "spec.nodeClassRef.name", func(o client.Object) []string { return []string{o.(*v1.NodeClaim).Spec.NodeClassRef.Name} }).
		Build()
	cp := &awsCloudProvider{CloudProvider: fake.NewCloudProvider(), classes: joinerClasses}
	poolHash := nodepoolhash.NewController(kc, cp)
	classHash := awshash.NewController(kc, caBundle)
	drift := nodeclaimdisruption.NewController(clk, kc, cp)
	reconcileHashes := func() {
		t.Helper()
		for _, o := range pools {
			np := &v1.NodePool{}
			mustGet(t, ctx, kc, o.Name, np)
			if _, err := poolHash.Reconcile(ctx, np); err != nil {
				t.Fatalf("nodepool.hash %s: %v", np.Name, err)
			}
		}
		for _, o := range classes {
			ec := &awsv1.EC2NodeClass{}
			mustGet(t, ctx, kc, o.Name, ec)
			if _, err := classHash.Reconcile(ctx, ec); err != nil {
				t.Fatalf("nodeclass.hash %s: %v", ec.Name, err)
			}
		}
	}
	// judge runs Karpenter's disruption controller on every NodeClaim and returns
	// each one's drift reason: the Drifted condition it sets from the NodePool
	// (static and requirements drift, instance types) or, for the EC2NodeClass's
	// static fields, the hash comparison of the AWS provider's
	// areStaticFieldsDrifted, which is not exported.
	judge := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, o := range claims {
			nc := &v1.NodeClaim{}
			mustGet(t, ctx, kc, o.Name, nc)
			if _, err := drift.Reconcile(ctx, nc); err != nil {
				t.Fatalf("nodeclaim.disruption %s: %v", nc.Name, err)
			}
			mustGet(t, ctx, kc, o.Name, nc)
			if c := nc.StatusConditions().Get(v1.ConditionTypeDrifted); c.IsTrue() {
				out[nc.Name] = c.Reason
				continue
			}
			ec := &awsv1.EC2NodeClass{}
			mustGet(t, ctx, kc, nc.Spec.NodeClassRef.Name, ec)
			if nodeClassDrifted(ec, nc) {
				out[nc.Name] = "NodeClassDrift"
			}
		}
		return out
	}

	// Karpenter's controllers start in no set order. Its disruption controller
	// may judge the NodeClaims before the hash controllers run: it then compares
	// Joiner's hashes with Joiner's (same version on both sides).
	if d := judge(); len(d) > 0 {
		t.Errorf("Karpenter finds Joiner's NodeClaims drifted before its hash controllers ran: %v", d)
	}
	reconcileHashes()
	if d := judge(); len(d) > 0 {
		t.Errorf("Karpenter finds Joiner's NodeClaims drifted after its hash controllers ran: %v", d)
	}
	t.Logf("%d live NodeClaim(s), %d launched by Joiner: none drifted before or after Karpenter's hash controllers", len(claims), launchedByJoiner)
	for _, o := range claims {
		nc := &v1.NodeClaim{}
		mustGet(t, ctx, kc, o.Name, nc)
		np := &v1.NodePool{}
		mustGet(t, ctx, kc, nc.Labels[v1.NodePoolLabelKey], np)
		ec := &awsv1.EC2NodeClass{}
		mustGet(t, ctx, kc, nc.Spec.NodeClassRef.Name, ec)
		want := map[string]string{
			v1.NodePoolHashAnnotationKey: np.Hash(), v1.NodePoolHashVersionAnnotationKey: v1.NodePoolHashVersion,
			awsv1.AnnotationEC2NodeClassHash: ec.Hash(caBundle), awsv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion,
		}
		for k, v := range want {
			if nc.Annotations[k] != v {
				t.Errorf("NodeClaim %s after Karpenter's hash controllers: %s=%q, want Karpenter's %q", nc.Name, k, nc.Annotations[k], v)
			}
		}
	}

	t.Logf("every NodeClaim re-stamped with Karpenter's hashes (nodepool-hash-version %s, ec2nodeclass-hash-version %s)",
		v1.NodePoolHashVersion, awsv1.EC2NodeClassHashVersion)

	// From then on Karpenter's drift covers Joiner's nodes as its own: an edit
	// of the NodePool's template drifts every NodeClaim, and so does one of the
	// EC2NodeClass.
	for _, o := range pools {
		np := &v1.NodePool{}
		mustGet(t, ctx, kc, o.Name, np)
		np.Spec.Template.Labels = map[string]string{"team": "wayback"}
		if err := kc.Update(ctx, np); err != nil {
			t.Fatal(err)
		}
	}
	reconcileHashes()
	d := judge()
	for _, o := range claims {
		if d[o.Name] != string(nodeclaimdisruption.NodePoolDrifted) {
			t.Errorf("NodeClaim %s after a NodePool edit: drift %q, want %s", o.Name, d[o.Name], nodeclaimdisruption.NodePoolDrifted)
		}
	}
	t.Logf("a NodePool template edit: %d NodeClaim(s) drifted (%s)", len(d), nodeclaimdisruption.NodePoolDrifted)
	for _, o := range pools {
		np := &v1.NodePool{}
		mustGet(t, ctx, kc, o.Name, np)
		np.Spec.Template.Labels = nil
		if err := kc.Update(ctx, np); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range classes {
		ec := &awsv1.EC2NodeClass{}
		mustGet(t, ctx, kc, o.Name, ec)
		ec.Spec.Tags = map[string]string{"team": "wayback"}
		if err := kc.Update(ctx, ec); err != nil {
			t.Fatal(err)
		}
	}
	reconcileHashes()
	d = judge()
	for _, o := range claims {
		if d[o.Name] != "NodeClassDrift" {
			t.Errorf("NodeClaim %s after an EC2NodeClass edit: drift %q, want NodeClassDrift", o.Name, d[o.Name])
		}
	}
	t.Logf("an EC2NodeClass edit: %d NodeClaim(s) drifted (NodeClassDrift)", len(d))
}

// replayAdoption replays scenario 020 and returns the NodePools, EC2NodeClasses
// and NodeClaims it ends with, as the API server serves them (JSON), and the
// cluster the scenario started with (Karpenter's).
func replayAdoption(t *testing.T, ctx context.Context) (map[schema.GroupVersionResource][][]byte, *manifest.Bundle) {
	t.Helper()
	sc, err := replay.Load(adoptScenario)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, m := range sc.Manifests {
		paths = append(paths, sc.Path(m))
	}
	seed, err := replay.LoadManifests(paths...)
	if err != nil {
		t.Fatal(err)
	}
	raw := map[schema.GroupVersionResource][][]byte{}
	res, err := replay.Run(ctx, sc, replay.Options{Final: func(ctx context.Context, c *kube.Clients) error {
		for _, gvr := range []schema.GroupVersionResource{kube.NodePoolGVR, kube.NodeClassGVR, kube.NodeClaimGVR} {
			list, err := c.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for i := range list.Items {
				b, err := list.Items[i].MarshalJSON()
				if err != nil {
					return err
				}
				raw[gvr] = append(raw[gvr], b)
			}
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() {
		for _, o := range res.Expectations {
			if !o.Met {
				t.Errorf("%s: %s", o.Check, o.Detail)
			}
		}
		t.Fatalf("scenario %s: %d expectation(s) not met", sc.Name, res.Failed)
	}
	return raw, seed
}

// decodeStrict decodes an object, failing on any field the type does not
// have: a field Joiner writes that Karpenter's types lack would be lost, or
// refused, on the way back.
func decodeStrict[T any](t *testing.T, b []byte) *T {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	out := new(T)
	if err := dec.Decode(out); err != nil {
		t.Fatalf("decoding into %T: %v\n%s", out, err, b)
	}
	return out
}

func mustGet(t *testing.T, ctx context.Context, kc client.Client, name string, obj client.Object) {
	t.Helper()
	if err := kc.Get(ctx, types.NamespacedName{Name: name}, obj); err != nil {
		t.Fatalf("get %T %s: %v", obj, name, err)
	}
}

func latestCreation(claims []*v1.NodeClaim) time.Time {
	var latest time.Time
	for _, nc := range claims {
		if nc.CreationTimestamp.After(latest) {
			latest = nc.CreationTimestamp.Time
		}
	}
	return latest
}

// nodeClassDrifted compares the EC2NodeClass's hash with the NodeClaim's as the
// AWS provider's static drift check does: only under the same hash version.
func nodeClassDrifted(ec *awsv1.EC2NodeClass, nc *v1.NodeClaim) bool {
	h, okH := ec.Annotations[awsv1.AnnotationEC2NodeClassHash]
	v, okV := ec.Annotations[awsv1.AnnotationEC2NodeClassHashVersion]
	ch, okCH := nc.Annotations[awsv1.AnnotationEC2NodeClassHash]
	cv, okCV := nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion]
	return okH && okV && okCH && okCV && v == cv && h != ch
}

// awsCloudProvider is Karpenter's fake cloud provider serving EC2NodeClasses
// (so Karpenter's controllers take the NodeClaims and NodePools as managed)
// and the catalog's instance types, so the disruption controller's
// instance-type check looks for each NodeClaim's type and offering in what AWS
// offers. It reports no cloud-side drift (AMIs, subnets, security groups).
type awsCloudProvider struct {
	*fake.CloudProvider
	classes map[string]*karpenter.EC2NodeClass
}

func (c *awsCloudProvider) GetSupportedNodeClasses() []status.Object {
	return []status.Object{&awsv1.EC2NodeClass{}}
}

func (c *awsCloudProvider) GetInstanceTypes(_ context.Context, np *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil || c.classes[ref.Name] == nil {
		return nil, fmt.Errorf("NodePool %s: no EC2NodeClass", np.Name)
	}
	return instanceTypes(catalog.Embedded(), catalog.OverheadFor(c.classes[ref.Name])), nil
}

var _ cloudprovider.CloudProvider = (*awsCloudProvider)(nil)
