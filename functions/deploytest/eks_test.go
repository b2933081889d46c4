//go:build unix

package deploytest

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/joiner-autoscaler/joiner/events"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kube/access"
	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
	"github.com/joiner-autoscaler/joiner/shared/mototest"
)

// eksWorld is the EKS cluster's world in w's account: its own API server, which
// authenticates EKS tokens as EKS does, and the EKS example stack.
func (w *world) eksWorld() *world {
	return &world{emulated: w.emulated, cluster: eksClusterName, kind: "eks", fns: map[string]*deployed{},
		eksAuth: &mototest.EKSAuthenticator{Cluster: eksClusterName}}
}

// startEKSCluster starts the EKS cluster's etcd + kube-apiserver, its tokens checked
// by w.eksAuth (a TokenReview webhook over TLS, as --authentication-token-webhook-
// config-file names EKS's authenticator), installs deploy/ and starts kube-scheduler
// (which marks pods unschedulable; no node ever joins this cluster). It runs beside
// the self-managed cluster's start; the returned function waits for it.
func (w *world) startEKSCluster(t *testing.T) (wait func()) {
	start := time.Now()
	hook := httptest.NewUnstartedServer(w.eksAuth)
	hook.EnableHTTP2 = false
	hook.StartTLS()
	t.Cleanup(hook.Close)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw})
	kc := filepath.Join(w.dir, "eks-authenticator.kubeconfig")
	if err := kubetest.WriteKubeconfig(&rest.Config{Host: hook.URL + "/authenticate", TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}}, kc); err != nil {
		t.Fatal(err)
	}
	type started struct {
		env   *kubetest.Env
		sched *kubetest.Scheduler
		err   error
	}
	done := make(chan started, 1)
	go func() {
		env, err := kubetest.StartWith(kubetest.Options{APIServerFlags: map[string]string{
			"authentication-token-webhook-config-file": kc,
			"authentication-token-webhook-version":     "v1",
		}})
		if err != nil {
			done <- started{err: err}
			return
		}
		if out, err := env.ApplyDeploy(); err != nil {
			done <- started{env: env, err: fmt.Errorf("kubectl apply deploy/: %v\n%s", err, out)}
			return
		}
		sched, err := env.StartScheduler()
		done <- started{env: env, sched: sched, err: err}
	}()
	return func() {
		t.Helper()
		s := <-done
		if s.env != nil {
			t.Cleanup(func() { _ = s.env.Stop() })
		}
		if s.sched != nil {
			t.Cleanup(func() { _ = s.sched.Stop() })
		}
		if s.err != nil {
			t.Fatalf("the EKS cluster: %v", s.err)
		}
		w.kube, w.scheduler = s.env, s.sched
		var err error
		if w.cs, err = kubernetes.NewForConfig(s.env.Config); err != nil {
			t.Fatal(err)
		}
		if w.dyn, err = dynamic.NewForConfig(s.env.Config); err != nil {
			t.Fatal(err)
		}
		t.Logf("phase EKS cluster (beside the self-managed one's start): %.1f s", time.Since(start).Seconds())
	}
}

// seedEKS creates the EKS cluster in moto (and another one the functions may not
// describe), its DescribeCluster answering with the API server's endpoint, CA and
// version, and points the authenticator at moto's STS.
func (w *world) seedEKS(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ec := eks.NewFromConfig(w.admin)
	for _, name := range []string{eksClusterName, "another-eks"} {
		if _, err := ec.CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String(name), RoleArn: aws.String("arn:aws:iam::" + account + ":role/eks-cluster"),
			ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: w.subnets}}); err != nil {
			t.Fatal(err)
		}
	}
	version, err := kube.ServerVersion(ctx, w.kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.moto.ServeEKSCluster(eksClusterName, w.kube.Config.Host, w.kube.Config.CAData, version); err != nil {
		t.Fatal(err)
	}
	w.eksAuth.STS = w.moto.URL
}

// mapAccessEntries gives the authenticator the access entries the deployed template
// declares (moto's CloudFormation does not create AWS::EKS::AccessEntry:
// moto-coverage.tsv): a STANDARD entry maps its role to the user EKS names when the
// entry names none, arn:aws:sts::<account>:assumed-role/<role>/{{SessionName}}, in
// its KubernetesGroups. The EC2_LINUX entry is the nodes' (system:node:... by the
// instance's DNS name); no node joins here, so it is left out.
func (w *world) mapAccessEntries(t *testing.T) {
	t.Helper()
	physical := map[string]string{}
	for _, r := range w.stackResources(t) {
		physical[r.LogicalResourceID] = r.PhysicalResourceID
	}
	mapped := 0
	for id, v := range w.tmpl["Resources"].(map[string]any) {
		res, _ := v.(map[string]any)
		if res["Type"] != "AWS::EKS::AccessEntry" {
			continue
		}
		props, _ := res["Properties"].(map[string]any)
		if props["Type"] != "STANDARD" {
			t.Logf("access entry %s (%v) left out: no node joins the EKS cluster", id, props["Type"])
			continue
		}
		if props["ClusterName"] != w.cluster || props["Username"] != nil {
			t.Fatalf("access entry %s: %v, want one for cluster %s with EKS's default username", id, props, w.cluster)
		}
		att, _ := props["PrincipalArn"].(map[string]any)["Fn::GetAtt"].([]any)
		if len(att) != 2 || att[1] != "Arn" || physical[att[0].(string)] == "" {
			t.Fatalf("access entry %s: principal %v is not a role of the stack", id, props["PrincipalArn"])
		}
		role, err := iam.NewFromConfig(w.admin).GetRole(context.Background(), &iam.GetRoleInput{RoleName: aws.String(physical[att[0].(string)])})
		if err != nil {
			t.Fatal(err)
		}
		var groups []string
		for _, g := range props["KubernetesGroups"].([]any) {
			groups = append(groups, g.(string))
		}
		w.eksAuth.Map(aws.ToString(role.Role.Arn), mototest.EKSIdentity{
			Username: "arn:aws:sts::{{AccountID}}:assumed-role/" + aws.ToString(role.Role.RoleName) + "/{{SessionName}}", Groups: groups})
		t.Logf("access entry %s: %s -> groups %v", id, aws.ToString(role.Role.Arn), groups)
		mapped++
	}
	if mapped != 1 {
		t.Fatalf("%d STANDARD access entries in %s, want the functions' one", mapped, w.stack)
	}
}

// eksLaunch: pods wait in the EKS cluster; the deployed provisioner, its sweep
// delivered as the schedule delivers it, finds the cluster with eks:DescribeCluster,
// authenticates with an EKS token its execution role signed (the API server's
// authenticator maps it to the stack's access entry: group joiner:functions), and
// launches one m6i.xlarge spot instance with the instance profile it made for the
// EC2NodeClass, holding the EKS stack's node role, every call allowed by the deployed
// policy.
func (w *world) eksLaunch(t *testing.T) {
	defer phase(t, "EKS launch")()
	ctx := context.Background()
	from := len(w.decisions(t, 0))
	w.applyPool(t)
	const ns = "shop"
	if _, err := w.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: ns, Labels: map[string]string{"app": "web"}},
			Spec: podSpec("1", "1Gi")}
		if _, err := w.cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "kube-scheduler marks the 3 pods unschedulable", time.Minute, func() (bool, string) {
		list, err := w.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, p := range list.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
					n++
				}
			}
		}
		return n == 3, fmt.Sprintf("%d unschedulable", n)
	})

	s := w.invoke(t, "provisioner", w.schedule(t, "ProvisionerSweepSchedule"))
	if s.Event != string(events.KindSchedulerTick) || len(s.NodesLaunched) != 1 || s.PodsPending != 3 {
		t.Fatalf("EKS provisioner's sweep: %+v, want the 3 pods seen and one NodeClaim launched", s)
	}
	ins := w.owned(t, "pending", "running")
	if len(ins) != 1 {
		t.Fatalf("%d instances owned by %s after the launch, want 1", len(ins), w.cluster)
	}
	w.checkInstance(t, ins[0], s.NodesLaunched[0])
	if _, err := w.dyn.Resource(kube.NodeClaimGVR).Get(ctx, s.NodesLaunched[0], metav1.GetOptions{}); err != nil {
		t.Errorf("NodeClaim %s in the EKS cluster: %v", s.NodesLaunched[0], err)
	}

	// The API server knew the provisioner by its EKS token, as the access entry says.
	fn := w.fns["provisioner"]
	roleName := fn.config.Role[strings.LastIndex(fn.config.Role, "/")+1:]
	user := "arn:aws:sts::" + account + ":assumed-role/" + roleName + "/" + fn.fnName
	authenticated := 0
	for _, r := range w.eksAuth.Reviews() {
		if r.Error != "" {
			t.Errorf("the EKS cluster refused a token of the provisioner: %+v", r)
			continue
		}
		if r.Username != user || strings.Join(r.Groups, ",") != "joiner:functions" {
			t.Errorf("the provisioner authenticated as %s %v, want %s in joiner:functions", r.Username, r.Groups, user)
		}
		authenticated++
	}
	if authenticated == 0 {
		t.Error("the EKS cluster's authenticator reviewed no token: the provisioner did not reach the API server with one")
	}
	// Every call of the EKS stack's functions' role was allowed; the EKS ones are there.
	calls := map[string]int{}
	for _, d := range w.decisions(t, from) {
		// A presigned GetCallerIdentity is logged by its caller, the assumed role.
		if d.Role != fn.config.Role && !strings.Contains(d.Principal, ":assumed-role/"+roleName+"/") {
			continue
		}
		calls[d.Request]++
		if d.Result != "Allowed" {
			t.Errorf("%s refused %s: %s %s", d.Role, d.Request, d.Result, d.Detail)
		}
	}
	for _, want := range []string{"eks:DescribeCluster", "sts:GetCallerIdentity", "ec2:CreateFleet", "iam:CreateInstanceProfile", "iam:AddRoleToInstanceProfile"} {
		if calls[want] == 0 {
			t.Errorf("the EKS functions never made %s (calls: %v)", want, calls)
		}
	}
	t.Logf("EKS: %d token review(s) authenticated %s in joiner:functions; the functions' role made, all allowed: %v", authenticated, user, calls)
}

// eksRefusals: the EKS cluster refuses tokens EKS refuses — one signed for another
// cluster, one of a role without an access entry (the self-managed stack's functions)
// — RBAC bounds the functions' group, and the deployed policy refuses DescribeCluster
// of another cluster.
func (w *world) eksRefusals(t *testing.T, sm *world) {
	ctx := context.Background()
	fn := w.fns["provisioner"].creds
	kubeAs := func(c aws.Credentials, cluster string) kubernetes.Interface {
		t.Helper()
		tok, err := access.NewTokenGenerator(credentials.StaticCredentialsProvider{Value: c}, region, cluster, nil).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := kubernetes.NewForConfig(&rest.Config{Host: w.kube.Config.Host, BearerToken: tok.Value,
			TLSClientConfig: rest.TLSClientConfig{CAData: w.kube.Config.CAData}})
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	from := len(w.eksAuth.Reviews())
	cases := []struct {
		name   string
		cs     kubernetes.Interface
		want   func(error) bool
		reason string
	}{
		{"the functions' token signed for another cluster", kubeAs(fn, "another-eks"), apierrors.IsUnauthorized, "SignatureDoesNotMatch"},
		{"the self-managed stack's functions (no access entry)", kubeAs(sm.fns["provisioner"].creds, eksClusterName), apierrors.IsUnauthorized, "no access entry"},
		{"the functions read secrets (not in deploy/rbac.yaml)", kubeAs(fn, eksClusterName), apierrors.IsForbidden, ""},
	}
	for _, c := range cases {
		_, err := c.cs.CoreV1().Secrets(kube.Namespace).List(ctx, metav1.ListOptions{})
		if !c.want(err) {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		t.Logf("refused: %s -> %v", c.name, err)
	}
	reasons := ""
	for _, r := range w.eksAuth.Reviews()[from:] {
		reasons += r.Error + "\n"
	}
	for _, c := range cases {
		if c.reason != "" && !strings.Contains(reasons, c.reason) {
			t.Errorf("%s: the authenticator's reasons do not say %q:\n%s", c.name, c.reason, reasons)
		}
	}
	_, err := eks.NewFromConfig(w.as(fn)).DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("another-eks")})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "AccessDeniedException" {
		t.Errorf("DescribeCluster of another cluster with the functions' role: %v, want AccessDeniedException", err)
	} else {
		t.Logf("refused: DescribeCluster of another cluster -> %s", ae.ErrorCode())
	}
}
