//go:build unix

package deploytest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/joiner-autoscaler/joiner/events"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
)

// TestDeployedStack deploys the self-managed and the EKS example stacks into moto with
// the CDK CLI, plays a user's first hour against the self-managed stack's deployed
// functions and the launch path against the EKS stack's (see the package
// documentation). The subtests run in order on the two deployments.
func TestDeployedStack(t *testing.T) {
	if testing.Short() {
		t.Skip("deploys the stack with the CDK CLI and runs kube-apiserver, kube-scheduler and KWOK")
	}
	start := time.Now()
	w := newWorld(t)
	ew := w.eksWorld()
	built := w.build(t)
	eksStarted := ew.startEKSCluster(t)
	w.startCluster(t)
	eksStarted()
	w.startMoto(t)
	w.seed(t)
	ew.seedEKS(t)
	built()
	w.deploy(t)
	ew.deploy(t)
	w.readFunctions(t)
	ew.readFunctions(t)
	ew.mapAccessEntries(t)
	w.enforce(t)
	w.startFunctions(t, functions...)
	// The EKS part is the provisioner's launch path.
	ew.startFunctions(t, "provisioner")
	iamFrom := len(w.decisions(t, 0))

	// The test's kubelet and ReplicaSet controller, until the cluster's part is over
	// (joined, so that neither logs after the test).
	ctx, cancel := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	stop := func() { cancel(); loops.Wait() }
	t.Cleanup(stop)
	rs := &replicas{w: w, ns: "shop", want: map[string]int{}, specs: map[string]corev1.PodSpec{}}
	loops.Add(2)
	go func() { defer loops.Done(); w.kubelet(ctx, t) }()
	go func() { defer loops.Done(); rs.run(ctx, t) }()

	var launched []ec2types.Instance
	ok := t.Run("first_hour", func(t *testing.T) { launched = w.firstHour(t, rs) })
	if !ok {
		t.FailNow()
	}
	t.Run("every_call_allowed", func(t *testing.T) { w.everyCallAllowed(t, iamFrom) })
	t.Run("refusals", func(t *testing.T) { w.refusals(t, launched) })
	t.Run("deployed_rule_patterns", w.rulePatterns)
	stop()
	t.Run("eks_launch", ew.eksLaunch)
	t.Run("eks_refusals", func(t *testing.T) { ew.eksRefusals(t, w) })
	// What is left is not about IAM; the CDK CLI signs as moto's test user.
	if err := w.moto.StopEnforcingIAM(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Removing, as infra/README.md says. The self-managed stack first shows what AWS
	// does to `cdk destroy` run before `joiner cleanup`, then recovers as documented;
	// the EKS stack goes in the documented order.
	resources := w.stackResources(t)
	t.Run("cdk_destroy_before_cleanup", func(t *testing.T) { w.destroyBeforeCleanup(t, resources) })
	t.Run("joiner_cleanup", w.cleanup)
	t.Run("cdk_destroy", func(t *testing.T) { w.destroy(t, resources) })
	eksResources := ew.stackResources(t)
	t.Run("eks_joiner_cleanup", ew.cleanup)
	t.Run("eks_cdk_destroy", func(t *testing.T) { ew.destroy(t, eksResources) })
	t.Logf("TestDeployedStack: %.1f s in all", time.Since(start).Seconds())
}

// applyPool renders testdata/pool.yaml for the deployed node role (the network's
// discovery tag being clusterName's for both clusters) and creates it.
func (w *world) applyPool(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(w.root, "functions", "deploytest", "testdata", "pool.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.NewReplacer("{{cluster}}", clusterName, "{{role}}", w.outputs["NodeRoleName"]).Replace(string(b))
	for _, part := range strings.Split(doc, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(part), &u.Object); err != nil {
			t.Fatal(err)
		}
		gvr := kube.NodePoolGVR
		if u.GetKind() == "EC2NodeClass" {
			gvr = kube.NodeClassGVR
		}
		if _, err := w.dyn.Resource(gvr).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", u.GetKind(), err)
		}
	}
}

func podSpec(cpu, mem string) corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}},
		TerminationGracePeriodSeconds: aws.Int64(0)}
}

// owned lists the account's instances tagged as this cluster's, by state.
func (w *world) owned(t *testing.T, states ...string) []ec2types.Instance {
	t.Helper()
	out, err := w.ec2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + w.ownedTag()), Values: []string{"owned"}},
		{Name: aws.String("instance-state-name"), Values: states}}})
	if err != nil {
		t.Fatal(err)
	}
	var ins []ec2types.Instance
	for _, r := range out.Reservations {
		ins = append(ins, r.Instances...)
	}
	sort.Slice(ins, func(i, j int) bool { return aws.ToTime(ins[i].LaunchTime).Before(aws.ToTime(ins[j].LaunchTime)) })
	return ins
}

// pods reports where app's pods are: node -> count, and how many are unbound.
func (w *world) pods(t *testing.T, ns, app string) (map[string]int, int) {
	t.Helper()
	list, err := w.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	on, unbound := map[string]int{}, 0
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		if p.Spec.NodeName == "" {
			unbound++
		} else if p.Status.Phase == corev1.PodRunning {
			on[p.Spec.NodeName]++
		}
	}
	return on, unbound
}

// nodeOf is the Node registered for instance id.
func (w *world) nodeOf(t *testing.T, id string) string {
	t.Helper()
	nodes, err := w.cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if facts.InstanceID(n.Spec.ProviderID) == id {
			return n.Name
		}
	}
	return ""
}

// firstHour: three web pods wait; the forwarder's Pending Pods batch reaches the
// deployed bus and its rule, the provisioner launches one m6i.xlarge spot instance
// with Joiner's instance profile; the node registers and the pods run there. A spot
// warning for it: the interruption function launches a replacement and drains; the
// pods move. A batch job needs a second node; when it finishes, the consolidator
// removes that node. It returns the instances launched, in order.
func (w *world) firstHour(t *testing.T, rs *replicas) []ec2types.Instance {
	defer phase(t, "first hour")()
	ctx := context.Background()
	w.applyPool(t)
	if _, err := w.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rs.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fwd := w.startForwarder(t)
	defer func() {
		if t.Failed() {
			t.Logf("forwarder stderr:\n%s", fwd.Stderr)
		}
	}()

	// 1. Pending pods -> forwarder -> deployed bus -> PendingPodsRule -> provisioner.
	rs.set("web", 3, podSpec("1", "1Gi"))
	d := w.nextDelivery(t, "provisioner", 90*time.Second)
	t.Logf("Pending Pods delivered by rule %s", d.Rule)
	s := w.invoke(t, "provisioner", d.Event)
	if s.Event != string(events.KindPendingPods) || len(s.NodesLaunched) != 1 || s.PodsPending != 3 {
		t.Fatalf("provisioner on the forwarder's batch: %+v, want the 3 pods seen and one NodeClaim launched", s)
	}
	ins := w.owned(t, "pending", "running")
	if len(ins) != 1 {
		t.Fatalf("%d owned instances after the launch, want 1", len(ins))
	}
	a := ins[0]
	w.checkInstance(t, a, s.NodesLaunched[0])

	// 2. The node registers, the NodeClaim is initialized, kube-scheduler binds the pods.
	aNode := w.joins(t, a, rs.ns, "web", 3)
	t.Logf("3 web pods run on %s (%s)", aNode, aws.ToString(a.InstanceId))

	// 3. A spot warning for that instance, as EC2 sends it, on the default bus.
	_, err := w.eventBridge(nil).PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		Source: aws.String("aws.ec2"), DetailType: aws.String(events.DetailTypeSpotInterruption),
		Resources: []string{"arn:aws:ec2:" + region + ":" + account + ":instance/" + aws.ToString(a.InstanceId)},
		Detail:    aws.String(`{"instance-id":"` + aws.ToString(a.InstanceId) + `","instance-action":"terminate"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	d = w.nextDelivery(t, "interruption", 30*time.Second)
	t.Logf("spot warning delivered by rule %s", d.Rule)
	s = w.invoke(t, "interruption", d.Event)
	if s.Interruptions != 1 || len(s.NodesLaunched) != 1 || len(s.NodesTerminated) != 1 {
		t.Fatalf("interruption: %+v, want one interruption handled, a replacement launched and the node removed", s)
	}
	waitFor(t, aws.ToString(a.InstanceId)+" terminated", 30*time.Second, func() (bool, string) {
		return len(w.owned(t, "running", "pending", "stopping", "shutting-down")) == 1, "still there"
	})
	b := w.owned(t, "pending", "running")[0]
	w.checkInstance(t, b, s.NodesLaunched[0])
	bNode := w.joins(t, b, rs.ns, "web", 3)
	t.Logf("after the spot warning: %s terminated, web pods on %s (%s)", aws.ToString(a.InstanceId), bNode, aws.ToString(b.InstanceId))

	// 4. A batch job that does not fit beside them: a second node (the forwarder's
	// next batch), which the consolidator removes once the job is done.
	rs.set("batch", 2, podSpec("1500m", "2Gi"))
	var c ec2types.Instance
	for c.InstanceId == nil {
		d = w.nextDelivery(t, "provisioner", 90*time.Second)
		s = w.invoke(t, "provisioner", d.Event)
		for _, in := range w.owned(t, "pending", "running") {
			if aws.ToString(in.InstanceId) != aws.ToString(b.InstanceId) {
				c = in // the batch's node (launch times are whole seconds: not an order)
			}
		}
	}
	cNode := w.joins(t, c, rs.ns, "batch", 2)
	rs.set("batch", 0, corev1.PodSpec{})
	waitFor(t, "batch pods gone", 30*time.Second, func() (bool, string) {
		on, unbound := w.pods(t, rs.ns, "batch")
		return len(on) == 0 && unbound == 0, fmt.Sprintf("on %v, %d unbound", on, unbound)
	})
	s = w.invoke(t, "consolidator", w.schedule(t, "ConsolidatorSchedule"))
	if len(s.NodesTerminated) != 1 {
		t.Fatalf("consolidator with %s empty: %+v, want it removed", cNode, s)
	}
	waitFor(t, aws.ToString(c.InstanceId)+" terminated by the consolidation", 30*time.Second, func() (bool, string) {
		left := w.owned(t, "running", "pending", "stopping", "shutting-down")
		return len(left) == 1 && aws.ToString(left[0].InstanceId) == aws.ToString(b.InstanceId), fmt.Sprintf("%d left", len(left))
	})
	if on, _ := w.pods(t, rs.ns, "web"); on[bNode] != 3 {
		t.Errorf("web pods after the consolidation: %v, want 3 still on %s", on, bNode)
	}
	t.Logf("consolidation: %s (%s) removed; %s keeps the web pods", cNode, aws.ToString(c.InstanceId), bNode)
	return []ec2types.Instance{a, b, c}
}

// joins waits for the node of instance in (the test's kubelet registers it), runs a
// provisioner sweep (which registers and initializes its NodeClaim, lifting
// karpenter.sh/unregistered), and waits until kube-scheduler has put count of app's
// pods there and KWOK runs them. It returns the node's name.
func (w *world) joins(t *testing.T, in ec2types.Instance, ns, app string, count int) string {
	t.Helper()
	id, node := aws.ToString(in.InstanceId), ""
	waitFor(t, "node of "+id, time.Minute, func() (bool, string) {
		node = w.nodeOf(t, id)
		return node != "", "no node"
	})
	w.invoke(t, "provisioner", w.schedule(t, "ProvisionerSweepSchedule"))
	waitFor(t, fmt.Sprintf("%d %s pods running on %s", count, app, node), 90*time.Second, func() (bool, string) {
		on, unbound := w.pods(t, ns, app)
		return on[node] == count, fmt.Sprintf("on %v, %d unbound", on, unbound)
	})
	return node
}

// checkInstance: an m6i.xlarge spot instance, tagged as Joiner's, with the instance
// profile Joiner made for the EC2NodeClass, holding the deployed node role.
func (w *world) checkInstance(t *testing.T, in ec2types.Instance, nodeClaim string) {
	t.Helper()
	tags := map[string]string{}
	for _, tg := range in.Tags {
		tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	if in.InstanceType != ec2types.InstanceTypeM6iXlarge || in.InstanceLifecycle != ec2types.InstanceLifecycleTypeSpot {
		t.Errorf("instance %s is %s %s, want an m6i.xlarge spot instance", aws.ToString(in.InstanceId), in.InstanceType, in.InstanceLifecycle)
	}
	if tags[w.ownedTag()] != "owned" || tags[karpenter.NodePoolLabelKey] != "default" || tags["karpenter.sh/nodeclaim"] != nodeClaim {
		t.Errorf("instance %s tags %v, want ownership, nodepool default and nodeclaim %s", aws.ToString(in.InstanceId), tags, nodeClaim)
	}
	if in.IamInstanceProfile == nil {
		t.Fatalf("instance %s has no instance profile", aws.ToString(in.InstanceId))
	}
	arn := aws.ToString(in.IamInstanceProfile.Arn)
	name := arn[strings.LastIndex(arn, "/")+1:]
	out, err := iam.NewFromConfig(w.admin).GetInstanceProfile(context.Background(), &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	ip := out.InstanceProfile
	var roles []string
	for _, r := range ip.Roles {
		roles = append(roles, aws.ToString(r.RoleName))
	}
	ptags := map[string]string{}
	for _, tg := range ip.Tags {
		ptags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	if !slices.Equal(roles, []string{w.outputs["NodeRoleName"]}) || ptags[w.ownedTag()] != "owned" || ptags["karpenter.k8s.aws/ec2nodeclass"] != "default" {
		t.Errorf("instance profile %s holds %v with tags %v, want the deployed node role %s, tagged owned for class default", name, roles, ptags, w.outputs["NodeRoleName"])
	}
	t.Logf("instance %s: %s %s in %s, profile %s (role %s)", aws.ToString(in.InstanceId), in.InstanceType, in.InstanceLifecycle,
		aws.ToString(in.Placement.AvailabilityZone), name, strings.Join(roles, ","))
}

// everyCallAllowed: every request the functions' role and the forwarder's made during
// the first hour was allowed by the deployed policies, as moto's enforcement judged it.
func (w *world) everyCallAllowed(t *testing.T, from int) {
	fnRole, fwdRole := w.outputs["FunctionsRoleArn"], w.outputs["ForwarderRoleArn"]
	byRole := map[string]map[string]int{fnRole: {}, fwdRole: {}}
	for _, d := range w.decisions(t, from) {
		calls, ok := byRole[d.Role]
		if !ok {
			continue
		}
		calls[d.Request]++
		if d.Result != "Allowed" {
			what := d.Detail
			if d.Refused != nil {
				what = d.Refused.Action + " on " + d.Refused.Resource + " " + d.Detail
			}
			t.Errorf("%s refused %s: %s %s", d.Role, d.Request, d.Result, what)
		}
	}
	for _, role := range []string{fnRole, fwdRole} {
		var list []string
		for req, n := range byRole[role] {
			list = append(list, fmt.Sprintf("%s x%d", req, n))
		}
		sort.Strings(list)
		t.Logf("%s made, all allowed: %s", role, strings.Join(list, ", "))
	}
	for _, want := range []string{"ec2:CreateFleet", "ec2:CreateLaunchTemplate", "ec2:TerminateInstances", "ec2:DescribeInstances",
		"iam:CreateInstanceProfile", "iam:AddRoleToInstanceProfile", "ssm:GetParameter", "secretsmanager:GetSecretValue"} {
		if byRole[fnRole][want] == 0 {
			t.Errorf("the functions never made %s: the first hour did not exercise the policy", want)
		}
	}
	if byRole[fwdRole]["events:PutEvents"] == 0 || byRole[fwdRole]["sts:AssumeRoleWithWebIdentity"] == 0 {
		t.Errorf("the forwarder's calls %v lack its web-identity sign-in or PutEvents", byRole[fwdRole])
	}
}

// refusals: calls outside the deployed policies, made with the deployed roles'
// credentials, are refused by moto's IAM enforcement with the service's error.
func (w *world) refusals(t *testing.T, launched []ec2types.Instance) {
	ctx := context.Background()
	// The provisioner's credentials (its execution role, assumed before enforcement).
	fn := w.fns["provisioner"].creds
	fec2, fiam := ec2.NewFromConfig(w.as(fn)), iam.NewFromConfig(w.as(fn))
	// Someone else's instance and launch template, in the same account and subnet.
	other, err := w.ec2.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(w.image), InstanceType: ec2types.InstanceTypeM6iLarge,
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), SubnetId: aws.String(w.subnets[0])})
	if err != nil {
		t.Fatal(err)
	}
	otherID := aws.ToString(other.Instances[0].InstanceId)
	lt, err := w.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("someone-elses"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(w.image)}})
	if err != nil {
		t.Fatal(err)
	}
	// Another role in another instance profile.
	aiam := iam.NewFromConfig(w.admin)
	if _, err := aiam.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("other-role"),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := aiam.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("other-profile")}); err != nil {
		t.Fatal(err)
	}
	if _, err := aiam.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("other-profile"), RoleName: aws.String("other-role")}); err != nil {
		t.Fatal(err)
	}
	joinerID := aws.ToString(launched[1].InstanceId) // the replacement, still Joiner's and running
	ownTags := []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{
		{Key: aws.String(w.ownedTag()), Value: aws.String("owned")}, {Key: aws.String(karpenter.NodePoolLabelKey), Value: aws.String("default")}}},
		{ResourceType: ec2types.ResourceTypeVolume, Tags: []ec2types.Tag{{Key: aws.String(w.ownedTag()), Value: aws.String("owned")}}},
		{ResourceType: ec2types.ResourceTypeNetworkInterface, Tags: []ec2types.Tag{{Key: aws.String(w.ownedTag()), Value: aws.String("owned")}}}}
	fwd := w.forwarderCredentials(t)
	fwdEB := w.eventBridge(&fwd)

	from := len(w.decisions(t, 0))
	cases := []struct {
		name, code, action string
		call               func() error
	}{
		{"terminate an instance without Joiner's tags", "UnauthorizedOperation", "ec2:TerminateInstances", func() error {
			_, err := fec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{otherID}})
			return err
		}},
		{"write the ownership tag onto someone else's instance", "UnauthorizedOperation", "ec2:CreateTags", func() error {
			_, err := fec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{otherID},
				Tags: []ec2types.Tag{{Key: aws.String(w.ownedTag()), Value: aws.String("owned")}, {Key: aws.String(karpenter.NodePoolLabelKey), Value: aws.String("default")}}})
			return err
		}},
		{"launch without the ownership tag", "UnauthorizedOperation", "ec2:RunInstances", func() error {
			_, err := fec2.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(w.image), InstanceType: ec2types.InstanceTypeM6iLarge,
				MinCount: aws.Int32(1), MaxCount: aws.Int32(1), SubnetId: aws.String(w.subnets[0])})
			return err
		}},
		{"pass another role (an instance profile holding it) to EC2", "UnauthorizedOperation", "iam:PassRole", func() error {
			_, err := fec2.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(w.image), InstanceType: ec2types.InstanceTypeM6iLarge,
				MinCount: aws.Int32(1), MaxCount: aws.Int32(1), SubnetId: aws.String(w.subnets[0]), TagSpecifications: ownTags,
				IamInstanceProfile: &ec2types.IamInstanceProfileSpecification{Name: aws.String("other-profile")}})
			return err
		}},
		{"put the node role into an instance profile Joiner did not create", "AccessDenied", "iam:AddRoleToInstanceProfile", func() error {
			_, err := fiam.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("other-profile"), RoleName: aws.String(w.outputs["NodeRoleName"])})
			return err
		}},
		{"stop one of Joiner's instances (never granted)", "UnauthorizedOperation", "ec2:StopInstances", func() error {
			_, err := fec2.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{joinerID}})
			return err
		}},
		{"delete someone else's launch template", "UnauthorizedOperation", "ec2:DeleteLaunchTemplate", func() error {
			_, err := fec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId})
			return err
		}},
		{"read another secret", "AccessDeniedException", "secretsmanager:GetSecretValue", func() error {
			_, err := secretsmanager.NewFromConfig(w.as(fn)).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("joiner/another-cluster")})
			return err
		}},
		{"the forwarder puts an event that is not a Pending Pods batch", "AccessDeniedException", "events:PutEvents", func() error {
			return putEvents(ctx, fwdEB, w.outputs["EventBusName"], "aws.ec2", events.DetailTypeSpotInterruption)
		}},
		{"the forwarder puts on the default bus", "AccessDeniedException", "events:PutEvents", func() error {
			return putEvents(ctx, fwdEB, "default", events.SourceForwarder, events.DetailTypePendingPods)
		}},
		{"another ServiceAccount's token assumes the forwarder role", "AccessDenied", "sts:AssumeRoleWithWebIdentity", func() error {
			_, err := w.webIdentity(w.token(t, "joiner-functions", "sts.amazonaws.com"), "refusals")
			return err
		}},
		{"the forwarder's token for another audience", "AccessDenied", "sts:AssumeRoleWithWebIdentity", func() error {
			_, err := w.webIdentity(w.token(t, "joiner-forwarder", "vault"), "refusals")
			return err
		}},
	}
	if _, err := w.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{otherID}, Tags: []ec2types.Tag{{Key: aws.String("team"), Value: aws.String("other")}}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		err := c.call()
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
			continue
		}
		t.Logf("refused: %s -> %s", c.name, ae.ErrorCode())
	}
	// Each refusal names the check that failed, in the enforcement's own log.
	refused := map[string]bool{}
	for _, d := range w.decisions(t, from) {
		switch {
		case d.Refused != nil:
			refused[d.Refused.Action] = true
		case d.Result != "Allowed":
			refused[d.Request] = true // a web-identity sign-in: the request is the check
		}
	}
	for _, c := range cases {
		if !refused[c.action] {
			t.Errorf("%s: no refusal of %s in moto's IAM log (refused: %v)", c.name, c.action, refused)
		}
	}
	if out, err := w.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{otherID, joinerID}}); err != nil {
		t.Fatal(err)
	} else {
		for _, r := range out.Reservations {
			for _, in := range r.Instances {
				if in.State.Name != ec2types.InstanceStateNameRunning {
					t.Errorf("%s is %s after the refused calls", aws.ToString(in.InstanceId), in.State.Name)
				}
				for _, tg := range in.Tags {
					if aws.ToString(in.InstanceId) == otherID && aws.ToString(tg.Key) == w.ownedTag() {
						t.Errorf("someone else's instance %s got the ownership tag", otherID)
					}
				}
			}
		}
	}
	_, _ = w.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{otherID}})
}

func putEvents(ctx context.Context, eb *eventbridge.Client, bus, source, detailType string) error {
	out, err := eb.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		EventBusName: aws.String(bus), Source: aws.String(source), DetailType: aws.String(detailType), Detail: aws.String(`{}`)}}})
	if err == nil && out.FailedEntryCount > 0 {
		return fmt.Errorf("entry failed: %s", aws.ToString(out.Entries[0].ErrorMessage))
	}
	return err
}

// webIdentity is sts:AssumeRoleWithWebIdentity of the forwarder role with token
// (unsigned, as the SDK's web-identity provider sends it).
func (w *world) webIdentity(token, session string) (*sts.AssumeRoleWithWebIdentityOutput, error) {
	return sts.NewFromConfig(w.admin).AssumeRoleWithWebIdentity(context.Background(), &sts.AssumeRoleWithWebIdentityInput{
		RoleArn: aws.String(w.outputs["ForwarderRoleArn"]), RoleSessionName: aws.String(session), WebIdentityToken: aws.String(token)},
		func(o *sts.Options) { o.Credentials = aws.AnonymousCredentials{} })
}

// forwarderCredentials signs in as the forwarder does (IRSA).
func (w *world) forwarderCredentials(t *testing.T) aws.Credentials {
	t.Helper()
	out, err := w.webIdentity(w.token(t, "joiner-forwarder", "sts.amazonaws.com"), "refusals")
	if err != nil {
		t.Fatalf("forwarder sign-in: %v", err)
	}
	c := out.Credentials
	return aws.Credentials{AccessKeyID: aws.ToString(c.AccessKeyId), SecretAccessKey: aws.ToString(c.SecretAccessKey), SessionToken: aws.ToString(c.SessionToken)}
}

// rulePatterns: each deployed rule's pattern, read back from EventBridge, matches
// exactly the samples in events/ it is for (TestEventPattern).
func (w *world) rulePatterns(t *testing.T) {
	defer phase(t, "rule patterns")()
	ctx := context.Background()
	eb := w.eventBridge(nil)
	rules := map[string]string{} // logical ID prefix -> pattern
	for _, bus := range []string{"default", w.outputs["EventBusName"]} {
		out, err := eb.ListRules(ctx, &eventbridge.ListRulesInput{EventBusName: aws.String(bus)})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range out.Rules {
			for _, id := range []string{"InterruptionEC2Rule", "InterruptionHealthRule", "PendingPodsRule"} {
				if strings.Contains(aws.ToString(r.Name), id) {
					rules[id] = aws.ToString(r.EventPattern)
				}
			}
		}
	}
	if len(rules) != 3 {
		t.Fatalf("deployed rules %v, want the stack's three", rules)
	}
	want := map[events.Kind]string{
		events.KindSpotInterruption: "InterruptionEC2Rule", events.KindRebalanceRecommendation: "InterruptionEC2Rule",
		events.KindStateChange: "InterruptionEC2Rule", events.KindHealthScheduledChange: "InterruptionHealthRule",
		events.KindPendingPods: "PendingPodsRule",
	}
	samples, err := filepath.Glob(filepath.Join(w.root, "events", "*.json"))
	if err != nil || len(samples) == 0 {
		t.Fatalf("no samples in events/: %v", err)
	}
	for _, file := range samples {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := events.Decode(raw)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var matched []string
		for _, id := range []string{"InterruptionEC2Rule", "InterruptionHealthRule", "PendingPodsRule"} {
			out, err := eb.TestEventPattern(ctx, &eventbridge.TestEventPatternInput{Event: aws.String(string(raw)), EventPattern: aws.String(rules[id])})
			if err != nil {
				t.Fatalf("%s against %s: %v", filepath.Base(file), id, err)
			}
			if out.Result {
				matched = append(matched, id)
			}
		}
		var expect []string
		if r, ok := want[ev.Kind()]; ok {
			expect = []string{r}
		}
		if !slices.Equal(matched, expect) {
			t.Errorf("%s (%s) matches %v, want %v", filepath.Base(file), ev.Kind(), matched, expect)
		} else {
			t.Logf("%s (%s) -> %v", filepath.Base(file), ev.Kind(), matched)
		}
	}
}

// stackResource is one line of ListStackResources.
type stackResource struct {
	LogicalResourceID  string `json:"LogicalResourceId"`
	PhysicalResourceID string `json:"PhysicalResourceId"`
	ResourceType       string `json:"ResourceType"`
}

// stackResources lists what CloudFormation created for the stack, to check afterwards
// that each is gone from its service.
func (w *world) stackResources(t *testing.T) []stackResource {
	t.Helper()
	var out struct {
		StackResourceSummaries []stackResource `json:"StackResourceSummaries"`
	}
	w.awsCLI(t, &out, "cloudformation", "list-stack-resources", "--stack-name", w.stack)
	var rs []stackResource
	for _, r := range out.StackResourceSummaries {
		if r.LogicalResourceID != "" { // moto lists what its CloudFormation skipped as empty entries (moto-coverage.tsv)
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		t.Fatalf("the stack %s lists no resources", w.stack)
	}
	return rs
}

// stackStatus is the stack's status and its reason, "" once it is deleted.
func (w *world) stackStatus(t *testing.T) (status, reason string) {
	t.Helper()
	var stacks struct {
		Stacks []struct {
			StackName         string `json:"StackName"`
			StackStatus       string `json:"StackStatus"`
			StackStatusReason string `json:"StackStatusReason"`
		} `json:"Stacks"`
	}
	w.awsCLI(t, &stacks, "cloudformation", "describe-stacks")
	for _, s := range stacks.Stacks {
		if s.StackName == w.stack {
			return s.StackStatus, s.StackStatusReason
		}
	}
	return "", ""
}

// left reads each of the stack's resources back from its own service (not from
// CloudFormation's account of it) and returns those still there by logical ID, the
// log groups still there by name, and how many resources it read back.
func (w *world) left(t *testing.T, resources []stackResource) (left map[string]string, logGroups []string, checked int) {
	t.Helper()
	live := map[string]map[string]bool{}
	list := func(typ, query string, args ...string) {
		var names []string
		w.awsCLI(t, &names, append(args, "--query", query)...)
		live[typ] = map[string]bool{}
		for _, n := range names {
			live[typ][n] = true
		}
	}
	list("AWS::Lambda::Function", "Functions[].FunctionName", "lambda", "list-functions")
	list("AWS::IAM::Role", "Roles[].RoleName", "iam", "list-roles")
	list("AWS::Events::EventBus", "EventBuses[].Name", "events", "list-event-buses")
	list("AWS::Events::Rule", "Rules[].Name", "events", "list-rules")
	list("AWS::SQS::Queue", "QueueUrls", "sqs", "list-queues")
	list("AWS::CloudWatch::Dashboard", "DashboardEntries[].DashboardName", "cloudwatch", "list-dashboards")
	list("AWS::Logs::LogGroup", "logGroups[].logGroupName", "logs", "describe-log-groups")
	// Gone with what holds them: a role's inline policies, a function's permissions.
	partOf := map[string]string{"AWS::IAM::Policy": "its role", "AWS::Lambda::Permission": "its function"}
	left = map[string]string{}
	for _, r := range resources {
		id := r.PhysicalResourceID
		if r.ResourceType == "AWS::Events::Rule" {
			// A rule on Joiner's bus is <bus>|<rule> (or an ARN ending in /<rule>); the
			// rules listed are the default bus's, Joiner's bus being gone.
			id = id[max(strings.LastIndex(id, "|"), strings.LastIndex(id, "/"))+1:]
		}
		switch names, ok := live[r.ResourceType]; {
		case r.ResourceType == "AWS::Logs::LogGroup":
			checked++
			if names[id] {
				logGroups = append(logGroups, id)
			}
		case ok:
			checked++
			if names[id] {
				left[r.LogicalResourceID] = r.ResourceType + " " + id
			}
		case partOf[r.ResourceType] != "":
		default:
			t.Errorf("%s %s: no check that cdk destroy removed it", r.ResourceType, r.LogicalResourceID)
		}
	}
	sort.Strings(logGroups)
	return left, logGroups, checked
}

// destroyBeforeCleanup: `cdk destroy` while the instance profile Joiner made still
// holds the stack's node role stops where AWS stops: IAM refuses DeleteRole
// (DeleteConflict, moto_iam.py answering as IAM does), the stack is DELETE_FAILED
// naming the node role, and everything else of it is gone.
func (w *world) destroyBeforeCleanup(t *testing.T, resources []stackResource) {
	defer phase(t, "cdk destroy "+w.kind+" before joiner cleanup")()
	profiles, err := iam.NewFromConfig(w.admin).ListInstanceProfilesForRole(context.Background(), &iam.ListInstanceProfilesForRoleInput{RoleName: aws.String(w.outputs["NodeRoleName"])})
	if err != nil {
		t.Fatal(err)
	}
	if len(profiles.InstanceProfiles) == 0 {
		t.Fatalf("no instance profile holds the node role %s: nothing for cdk destroy to stop at", w.outputs["NodeRoleName"])
	}
	out, err := w.runDeployScript(append([]string{"destroy", w.outDir}, w.context...)...)
	if err == nil {
		t.Fatalf("cdk destroy succeeded while %s held the node role; AWS refuses it:\n%s", aws.ToString(profiles.InstanceProfiles[0].InstanceProfileName), out)
	}
	status, reason := w.stackStatus(t)
	nodeRole := ""
	for _, r := range resources {
		if r.ResourceType == "AWS::IAM::Role" && r.PhysicalResourceID == w.outputs["NodeRoleName"] {
			nodeRole = r.LogicalResourceID
		}
	}
	if status != "DELETE_FAILED" || nodeRole == "" || !strings.Contains(reason, nodeRole) {
		t.Errorf("stack %s after cdk destroy: %s %q, want DELETE_FAILED naming the node role (%s)", w.stack, status, reason, nodeRole)
	}
	if !strings.Contains(out, "DELETE_FAILED") || !strings.Contains(out, "must remove roles from instance profile first") {
		t.Errorf("cdk destroy's output does not report IAM's DeleteConflict:\n%s", out)
	}
	left, _, _ := w.left(t, resources)
	if len(left) != 1 || left[nodeRole] == "" {
		t.Errorf("left after the failed cdk destroy: %v, want the node role %s only", left, nodeRole)
	}
	t.Logf("cdk destroy before joiner cleanup: %s (%s); left: %v", status, strings.TrimSpace(reason), left)
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "DELETE_FAILED") || strings.Contains(line, "failed") {
			t.Logf("  %s", strings.TrimSpace(line))
		}
	}
}

// destroy: `cdk destroy` after `joiner cleanup` deletes the stack (DELETE_COMPLETE)
// and every resource of it but the log groups, kept on purpose (RemovalPolicy RETAIN);
// those go by the commands infra/README.md gives.
func (w *world) destroy(t *testing.T, resources []stackResource) {
	defer phase(t, "cdk destroy "+w.kind)()
	out, err := w.runDeployScript(append([]string{"destroy", w.outDir}, w.context...)...)
	if err != nil {
		t.Fatalf("cdk destroy: %v\n%s", err, out)
	}
	// Deleted: gone from the list, DELETE_COMPLETE by its ID.
	if status, reason := w.stackStatus(t); status != "" {
		t.Errorf("stack %s is %s (%s) after cdk destroy", w.stack, status, reason)
	}
	left, logGroups, checked := w.left(t, resources)
	for id, what := range left {
		t.Errorf("%s (%s) is left after cdk destroy", what, id)
	}
	if len(logGroups) != len(functions) {
		t.Errorf("log groups kept: %v, want the %d functions' (RemovalPolicy RETAIN)", logGroups, len(functions))
	}
	t.Logf("cdk destroy: stack deleted, %d resources read back from their services, all gone but the log groups kept on purpose %v; "+
		"the rest (inline policies, permissions) gone with their role or function", checked, logGroups)

	// infra/README.md, "Removing": the retained log groups, by the prefix CloudFormation
	// names them with (<stack>-<logical ID>...; <stack>- alone would also match the
	// groups of a cluster whose name starts with this one's, as deploytest-eks does).
	prefixes := make([]string, len(functions))
	for i, f := range functions {
		prefixes[i] = w.stack + "-" + strings.ToUpper(f[:1]) + f[1:] + "Logs"
	}
	for _, p := range prefixes {
		var names []string
		w.awsCLI(t, &names, "logs", "describe-log-groups", "--log-group-name-prefix", p, "--query", "logGroups[].logGroupName")
		for _, n := range names {
			w.awsCLI(t, nil, "logs", "delete-log-group", "--log-group-name", n)
		}
	}
	var still []string
	w.awsCLI(t, &still, "logs", "describe-log-groups", "--query", "logGroups[].logGroupName")
	for _, n := range still {
		for _, p := range prefixes {
			if strings.HasPrefix(n, p) {
				t.Errorf("log group %s is left after infra/README.md's delete-log-group commands", n)
			}
		}
	}
}

// cleanup: `joiner cleanup` terminates the instances Joiner left behind (by its tags),
// deletes its launch templates and instance profiles, and nothing else.
func (w *world) cleanup(t *testing.T) {
	ctx := context.Background()
	left := w.owned(t, "pending", "running")
	if len(left) == 0 {
		t.Fatal("no Joiner instance left to clean up")
	}
	other, err := w.ec2.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(w.image), InstanceType: ec2types.InstanceTypeM6iLarge,
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), SubnetId: aws.String(w.subnets[0])})
	if err != nil {
		t.Fatal(err)
	}
	cmd := execJoiner(w, "cleanup", "--cluster", w.cluster)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("joiner cleanup: %v\n%s", err, out)
	}
	t.Logf("joiner cleanup:\n%s", out)
	if still := w.owned(t, "pending", "running", "stopping", "stopped"); len(still) > 0 {
		t.Errorf("%d Joiner instance(s) left after joiner cleanup", len(still))
	}
	lts, err := w.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{{Name: aws.String("tag:" + w.ownedTag()), Values: []string{"owned"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(lts.LaunchTemplates) > 0 {
		t.Errorf("%d Joiner launch template(s) left", len(lts.LaunchTemplates))
	}
	ips, err := iam.NewFromConfig(w.admin).ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ip := range ips.InstanceProfiles {
		if strings.HasPrefix(aws.ToString(ip.InstanceProfileName), w.cluster+"_") {
			t.Errorf("Joiner's instance profile %s is left", aws.ToString(ip.InstanceProfileName))
		}
	}
	d, err := w.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{aws.ToString(other.Instances[0].InstanceId)}})
	if err != nil || d.Reservations[0].Instances[0].State.Name != ec2types.InstanceStateNameRunning {
		t.Errorf("joiner cleanup touched an instance it did not launch: %v %v", d, err)
	}
}

// execJoiner runs the joiner CLI with the administrator's credentials against moto.
func execJoiner(w *world, args ...string) *exec.Cmd {
	none := filepath.Join(w.dir, "none")
	cmd := exec.Command(w.bins["joiner"], args...)
	cmd.Env = []string{"PATH=" + filepath.Dir(w.bins["joiner"]) + ":/usr/bin:/bin", "HOME=" + w.dir,
		"AWS_ACCESS_KEY_ID=" + w.adminKey[0], "AWS_SECRET_ACCESS_KEY=" + w.adminKey[1], "AWS_REGION=" + region,
		"AWS_ENDPOINT_URL=" + w.moto.URL, "AWS_CONFIG_FILE=" + none, "AWS_SHARED_CREDENTIALS_FILE=" + none, "AWS_EC2_METADATA_DISABLED=true",
		"JOINER_RUN=" + w.bins["joiner-run"]}
	return cmd
}
