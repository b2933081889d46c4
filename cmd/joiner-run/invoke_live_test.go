package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
	"github.com/joiner-autoscaler/joiner/shared/mototest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kubetest.StopShared()
	os.Exit(code)
}

const liveCluster = "invoke-live"

// TestInvokeLiveDryRun runs `joiner invoke provisioner --live` with DRY_RUN=1 against
// moto_server (AWS through the SDK's default chain) and a real kube-apiserver (a
// kubeconfig the test writes): the plan is made, EC2 answers DryRunOperation for the
// launch template and the fleet, and neither side is changed.
func TestInvokeLiveDryRun(t *testing.T) {
	env := kubetest.Shared(t)
	ep := mototest.New(t)
	ctx := context.Background()
	awsCfg := mototest.AWSConfig(ep)
	ec := ec2.NewFromConfig(awsCfg)
	image := seedMotoCluster(t, ctx, ec, eks.NewFromConfig(awsCfg))
	// The node role exists, as the user (or the stack) created it: Joiner makes
	// the instance profile holding it.
	if _, err := iam.NewFromConfig(awsCfg).CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("KarpenterNodeRole-" + liveCluster),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)}); err != nil {
		t.Fatal(err)
	}

	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	applyPoolAndClass(t, ctx, dyn, image)
	ns := "invoke-live"
	t.Cleanup(func() { clearCluster(t, cs, dyn, ns) })
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		createUnschedulable(t, ctx, cs, ns, fmt.Sprintf("web-%d", i))
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := kubetest.WriteKubeconfig(env.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}

	// The caller's environment: credentials and endpoint for the SDK's default
	// chain, DRY_RUN=1 as a user would type it.
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
		"AWS_ENDPOINT_URL": ep, "AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none, "DRY_RUN": "1",
		"KUBECONFIG": "", "JOINER_DRY_RUN": ""} {
		t.Setenv(k, v)
	}
	before := liveFingerprint(t, ctx, cs, dyn, ec, ns)
	o, code, stderr := invokeJSON(t, "provisioner", "-e", "../../events/scheduled-rule.json", "--live", "--kubeconfig", kubeconfig, "--cluster", liveCluster)
	if code != 0 || o.Summary == nil {
		t.Fatalf("exit %d, error %q\n%s", code, o.Error, stderr)
	}
	s := o.Summary
	if b, err := json.MarshalIndent(s, "", "  "); err == nil {
		t.Logf("dry-run summary:\n%s", b)
	}
	if s.PodsPending != 3 || len(s.NodesLaunched) != 0 || !strings.HasPrefix(s.Action, "launched 0 of ") {
		t.Errorf("summary %+v: want the 3 pods planned and nothing launched", s)
	}
	ops := map[string]int{}
	for _, r := range s.DryRun {
		if !r.Allowed || r.Code != "DryRunOperation" {
			t.Errorf("dry run %+v: moto allows everything", r)
		}
		ops[r.Operation]++
	}
	if ops["CreateLaunchTemplate"] == 0 || ops["CreateFleet"] == 0 {
		t.Errorf("dry-run answers %v, want CreateLaunchTemplate and CreateFleet", ops)
	}
	if o.Changes != nil {
		t.Errorf("--live reported simulated changes: %+v", o.Changes)
	}
	after := liveFingerprint(t, ctx, cs, dyn, ec, ns)
	if before != after {
		t.Errorf("a dry run mutated something:\nbefore %s\nafter  %s", before, after)
	}
	if !strings.Contains(stderr, `"msg":"decision"`) {
		t.Errorf("no decision log line on stderr:\n%s", stderr)
	}

	// The same invocation for real launches: the fingerprint above would have seen it.
	t.Setenv("DRY_RUN", "")
	o, code, stderr = invokeJSON(t, "provisioner", "-e", "../../events/scheduled-rule.json", "--live", "--kubeconfig", kubeconfig, "--cluster", liveCluster)
	if code != 0 || len(o.Summary.NodesLaunched) == 0 || len(o.Summary.DryRun) != 0 {
		t.Fatalf("real run: exit %d, %+v\n%s", code, o.Summary, stderr)
	}
	if real := liveFingerprint(t, ctx, cs, dyn, ec, ns); real == before {
		t.Errorf("a real launch left the fingerprint as it was: %s", real)
	}
}

// seedMotoCluster creates what the EC2NodeClass selects (subnets and a security
// group tagged for discovery) and the EKS cluster user data is built from; it
// returns an x86_64 image id moto ships.
func seedMotoCluster(t *testing.T, ctx context.Context, ec *ec2.Client, ek *eks.Client) string {
	t.Helper()
	vpc, err := ec.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	disc := []ec2types.Tag{{Key: aws.String("karpenter.sh/discovery"), Value: aws.String(liveCluster)}}
	var subnets []string
	for i, zone := range []string{"us-east-1a", "us-east-1b"} {
		sn, err := ec.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String(fmt.Sprintf("10.0.%d.0/24", i+1)), AvailabilityZone: aws.String(zone)})
		if err != nil {
			t.Fatal(err)
		}
		subnets = append(subnets, aws.ToString(sn.Subnet.SubnetId))
	}
	sg, err := ec.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("nodes"), Description: aws.String("nodes"), VpcId: vpc.Vpc.VpcId})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ec.CreateTags(ctx, &ec2.CreateTagsInput{Resources: append(subnets, aws.ToString(sg.GroupId)), Tags: disc}); err != nil {
		t.Fatal(err)
	}
	if _, err := ek.CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String(liveCluster), RoleArn: aws.String("arn:aws:iam::123456789012:role/eks"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: subnets}}); err != nil {
		t.Fatal(err)
	}
	imgs, err := ec.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{"al2023-ami-2023*-x86_64"}}}})
	if err != nil || len(imgs.Images) == 0 {
		t.Fatalf("moto has no al2023 x86_64 image: %v", err)
	}
	ids := make([]string, len(imgs.Images))
	for i, im := range imgs.Images {
		ids[i] = aws.ToString(im.ImageId)
	}
	sort.Strings(ids)
	return ids[0]
}

func applyPoolAndClass(t *testing.T, ctx context.Context, dyn dynamic.Interface, image string) {
	t.Helper()
	docs := map[string]string{
		"nodeclass": fmt.Sprintf(`apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: live}
spec:
  amiFamily: AL2023
  amiSelectorTerms: [{id: %s}]
  role: KarpenterNodeRole-%s
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: %s}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: %s}}]
`, image, liveCluster, liveCluster, liveCluster),
		"nodepool": `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: live}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: live}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1b]}
`,
	}
	for kind, doc := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		gvr := kube.NodePoolGVR
		if kind == "nodeclass" {
			gvr = kube.NodeClassGVR
		}
		if _, err := dyn.Resource(gvr).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", kind, err)
		}
	}
}

func createUnschedulable(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}
	p, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/0 nodes are available", LastTransitionTime: metav1.Now()}}
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// liveFingerprint summarises everything a provisioner could write: pods (by
// resourceVersion), NodeClaims, Nodes, Events, Leases; instances and launch templates.
func liveFingerprint(t *testing.T, ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, ec *ec2.Client, ns string) string {
	t.Helper()
	var parts []string
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		parts = append(parts, "pod "+p.Name+"@"+p.ResourceVersion)
	}
	ncs, err := dyn.Resource(kube.NodeClaimGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leases, err := cs.CoordinationV1().Leases(kube.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inst, err := ec.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	if err != nil {
		t.Fatal(err)
	}
	lts, err := ec.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{})
	if err != nil {
		t.Fatal(err)
	}
	parts = append(parts, fmt.Sprintf("nodeclaims=%d nodes=%d events=%d leases=%d reservations=%d launchTemplates=%d",
		len(ncs.Items), len(nodes.Items), len(evs.Items), len(leases.Items), len(inst.Reservations), len(lts.LaunchTemplates)))
	return strings.Join(parts, " ")
}

// clearCluster removes what a test left in the shared API server (Karpenter objects,
// NodeClaims with their finalizers, nodes, the namespace), so the next test starts
// from an empty cluster.
func clearCluster(t *testing.T, cs kubernetes.Interface, dyn dynamic.Interface, ns string) {
	ctx := context.Background()
	for _, gvr := range []schema.GroupVersionResource{kube.NodeClaimGVR, kube.NodePoolGVR, kube.NodeClassGVR} {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Logf("clean-up: %v", err)
			continue
		}
		for _, u := range list.Items {
			_, _ = dyn.Resource(gvr).Patch(ctx, u.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			_ = dyn.Resource(gvr).Delete(ctx, u.GetName(), metav1.DeleteOptions{})
		}
	}
	_ = cs.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	zero := int64(0)
	_ = cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	_ = cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
}
