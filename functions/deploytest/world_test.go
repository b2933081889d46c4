//go:build unix

package deploytest

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/joiner-autoscaler/joiner/functions/internal/lambdatest"
	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/handlers"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kube/access"
	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
	"github.com/joiner-autoscaler/joiner/shared/kubesim"
	"github.com/joiner-autoscaler/joiner/shared/mototest"
)

const (
	clusterName = "deploytest"
	account     = "123456789012"
	region      = "us-east-1"
	// issuer is the API server's service-account issuer and the IAM OIDC provider's
	// URL (IRSA): https, no port, a path as a self-hosted discovery document has.
	issuer = "https://oidc.deploytest.joiner.test/cluster"
	// eksClusterName is the EKS example stack's cluster (another API server).
	eksClusterName = "deploytest-eks"
	// serviceCIDR is kubeadm's default, given to the stack as -c serviceCidr.
	serviceCIDR = "10.96.0.0/12"
	discovery   = "karpenter.sh/discovery"
)

// functions are the stack's functions: their output key prefix and folder name.
var functions = []string{"provisioner", "interruption", "consolidator"}

// emulated is the emulated AWS account and what both clusters' worlds share in it.
type emulated struct {
	root string
	// dir holds the builds, the deployments' cdk.out and the logs.
	dir  string
	moto *mototest.Server
	// iamLog is moto_iam.py's decision log; deliveries the events its rules
	// delivered to Lambda targets.
	iamLog, deliveries string
	rie                string

	// admin is the account's administrator (an IAM user once enforcement is on).
	admin    aws.Config
	adminKey [2]string
	ec2      *ec2.Client

	// image is the x86_64 AL2023 image the public parameters name; subnets and sg
	// the networking the EC2NodeClasses select (tagged for discovery as clusterName).
	image   string
	subnets []string
	sg      string

	bins map[string]string // forwarder, joiner, joiner-run

	// deliveredUpTo is how many lines of the deliveries file were consumed.
	mu            sync.Mutex
	deliveredUpTo int
}

// world is one cluster, the example stack deployed for it into the account, and its
// functions running as deployed: the self-managed cluster (the first hour) or the
// EKS one (the provisioner's launch path through EKS authentication).
type world struct {
	*emulated
	cluster string // the stack's clusterName, the ownership tag's
	kind    string // the stack's clusterKind

	kube      *kubetest.Env
	scheduler *kubetest.Scheduler
	kwok      *kubetest.KWOK // self-managed only
	cs        kubernetes.Interface
	dyn       dynamic.Interface
	// eksAuth is the EKS cluster's token authenticator (its API server's webhook).
	eksAuth *mototest.EKSAuthenticator

	secret string // the self-managed cluster's secret ARN

	outDir  string   // scripts/deploy-local.sh's OUTDIR
	context []string // the -c arguments of deploy
	stack   string
	outputs map[string]string
	tmpl    map[string]any

	fns map[string]*deployed
}

// ownedTag is the ownership tag of the cluster's instances and Joiner's other
// resources.
func (w *world) ownedTag() string { return "kubernetes.io/cluster/" + w.cluster }

// deployed is one function as the stack deployed it, running under the emulator.
type deployed struct {
	name    string
	fnName  string
	config  lambdaConfig
	boot    string          // the deployed bootstrap, unpacked
	creds   aws.Credentials // the execution role's
	emu     *lambdatest.Emulator
	invoked int
}

// lambdaConfig is the part of GetFunctionConfiguration the test reads.
type lambdaConfig struct {
	FunctionName string   `json:"FunctionName"`
	FunctionArn  string   `json:"FunctionArn"`
	Runtime      string   `json:"Runtime"`
	Handler      string   `json:"Handler"`
	Role         string   `json:"Role"`
	Timeout      int      `json:"Timeout"`
	MemorySize   int      `json:"MemorySize"`
	CodeSha256   string   `json:"CodeSha256"`
	Architecture []string `json:"Architectures"`
	Environment  struct {
		Variables map[string]string `json:"Variables"`
	} `json:"Environment"`
	LoggingConfig struct {
		LogFormat           string `json:"LogFormat"`
		ApplicationLogLevel string `json:"ApplicationLogLevel"`
	} `json:"LoggingConfig"`
}

// need fails (make test, CI) or skips the test when a real part is missing.
func need(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" || os.Getenv("JOINER_REQUIRE_REAL_PARTS") == "1" {
		t.Fatalf("%s is required (CI / make test): %v", what, err)
	}
	t.Skipf("skipping: %s unavailable: %v", what, err)
}

// phase logs how long a step took: the figures the README's timing is made of.
func phase(t *testing.T, name string) func() {
	start := time.Now()
	return func() { t.Logf("phase %s: %.1f s", name, time.Since(start).Seconds()) }
}

func newWorld(t *testing.T) *world {
	t.Helper()
	root, err := kubetest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	w := &world{emulated: &emulated{root: root, dir: t.TempDir()}, cluster: clusterName, kind: "self-managed", fns: map[string]*deployed{}}
	for _, tool := range []string{"aws", "jq", "moto_server"} {
		_, err := exec.LookPath(tool)
		need(t, tool, err)
	}
	_, err = os.Stat(filepath.Join(root, "infra", "node_modules", ".bin", "cdk"))
	need(t, "the pinned CDK CLI (make node-tools)", err)
	_, err = kubetest.AssetsDir()
	need(t, "kube-apiserver and etcd", err)
	w.rie, err = lambdatest.InstallRIE(root)
	lambdatest.RequireRIE(t, err)
	return w
}

// build compiles the three bootstraps for the host (the stack's distDir: what it
// deploys is what runs), the forwarder and the joiner CLI. It runs beside the
// cluster's and moto's start; the returned function waits for it.
func (w *world) build(t *testing.T) (wait func()) {
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		pkgs := make([]string, len(functions))
		for i, f := range functions {
			pkgs[i] = "./functions/" + f
		}
		if _, err := lambdatest.Build(w.root, filepath.Join(w.dir, "dist"), pkgs...); err != nil {
			done <- err
			return
		}
		bin := filepath.Join(w.dir, "bin") + string(filepath.Separator)
		cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/forwarder", "./cmd/joiner", "./cmd/joiner-run")
		cmd.Dir = w.root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			done <- fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		w.bins = map[string]string{}
		for _, b := range []string{"forwarder", "joiner", "joiner-run"} {
			w.bins[b] = filepath.Join(bin, b)
		}
		done <- nil
	}()
	return func() {
		t.Helper()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		t.Logf("phase build (beside the cluster's start): %.1f s", time.Since(start).Seconds())
	}
}

// startCluster starts etcd + kube-apiserver (its service-account tokens issued by the
// IRSA issuer), installs deploy/, and starts kube-scheduler and KWOK beside it.
func (w *world) startCluster(t *testing.T) {
	defer phase(t, "cluster")()
	env, err := kubetest.StartWith(kubetest.Options{ServiceAccountIssuer: issuer})
	if err != nil {
		t.Fatal(err)
	}
	w.kube = env
	t.Cleanup(func() { _ = env.Stop() })
	if out, err := env.ApplyDeploy(); err != nil {
		t.Fatalf("kubectl apply deploy/: %v\n%s", err, out)
	}
	if w.scheduler, err = env.StartScheduler(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.scheduler.Stop() })
	if w.kwok, err = env.StartKWOK(kubetest.KWOKOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.kwok.Stop() })
	if w.cs, err = kubernetes.NewForConfig(env.Config); err != nil {
		t.Fatal(err)
	}
	if w.dyn, err = dynamic.NewForConfig(env.Config); err != nil {
		t.Fatal(err)
	}
}

// token asks the API server for a token of a ServiceAccount in Joiner's namespace.
func (w *world) token(t *testing.T, sa string, audiences ...string) string {
	t.Helper()
	tr := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: aws.Int64(3600)}}
	out, err := w.cs.CoreV1().ServiceAccounts(kube.Namespace).CreateToken(context.Background(), sa, tr, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s: %v", sa, err)
	}
	return out.Status.Token
}

// startMoto starts moto_server through moto_iam.py (enforcement off until enforce).
func (w *world) startMoto(t *testing.T) {
	logs := w.dir
	if d := os.Getenv("JOINER_DEPLOYTEST_LOGS"); d != "" {
		// Kept after the test, to read why a call was refused.
		logs = d
		_ = os.Remove(filepath.Join(d, "moto-iam.jsonl"))
		_ = os.Remove(filepath.Join(d, "moto-iam.jsonl.lambda"))
	}
	w.iamLog = filepath.Join(logs, "moto-iam.jsonl")
	w.deliveries = w.iamLog + ".lambda"
	s, err := mototest.StartWithIAM(w.root, w.iamLog)
	need(t, "moto_server with moto_iam.py", err)
	w.moto = s
	t.Cleanup(s.Close)
	w.admin = mototest.AWSConfig(s.URL)
	w.ec2 = ec2.NewFromConfig(w.admin)
}

// seed creates what exists in the account before Joiner: the cluster's network
// (tagged for discovery), the AMI's public parameters, the IAM OIDC provider of the
// cluster's issuer, and the cluster secret the functions reach the API server with
// (the joiner-functions ServiceAccount's token, as infra/README.md says).
func (w *world) seed(t *testing.T) {
	defer phase(t, "seed")()
	ctx := context.Background()
	ec := w.ec2
	vpc, err := ec.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	for i, zone := range []string{"us-east-1a", "us-east-1b"} {
		sn, err := ec.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String(fmt.Sprintf("10.0.%d.0/24", i+1)), AvailabilityZone: aws.String(zone)})
		if err != nil {
			t.Fatal(err)
		}
		w.subnets = append(w.subnets, aws.ToString(sn.Subnet.SubnetId))
	}
	sg, err := ec.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("nodes"), Description: aws.String("nodes"), VpcId: vpc.Vpc.VpcId})
	if err != nil {
		t.Fatal(err)
	}
	w.sg = aws.ToString(sg.GroupId)
	if _, err := ec.CreateTags(ctx, &ec2.CreateTagsInput{Resources: append(slices.Clone(w.subnets), w.sg),
		Tags: []ec2types.Tag{{Key: aws.String(discovery), Value: aws.String(clusterName)}}}); err != nil {
		t.Fatal(err)
	}
	images := map[string]string{}
	for _, arch := range []string{"x86_64", "arm64"} {
		out, err := ec.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{"al2023-ami-2023*-" + arch}}}})
		if err != nil || len(out.Images) == 0 {
			t.Fatalf("moto has no al2023 %s image: %v", arch, err)
		}
		ids := make([]string, len(out.Images))
		for i, im := range out.Images {
			ids[i] = aws.ToString(im.ImageId)
		}
		sort.Strings(ids)
		images[arch] = ids[0]
	}
	w.image = images["x86_64"]
	// The EKS optimized AL2023 parameters an al2023@latest alias reads, for the API
	// server's version, as AWS publishes them.
	version, err := kube.ServerVersion(ctx, w.kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]string{}
	for arch, id := range images {
		for _, variant := range []string{"standard", "nvidia", "neuron"} {
			params["/aws/service/eks/optimized-ami/"+version+"/amazon-linux-2023/"+arch+"/"+variant+"/recommended/image_id"] = id
		}
	}
	if err := w.moto.PublishPublicParameters(params); err != nil {
		t.Fatal(err)
	}
	if _, err := iam.NewFromConfig(w.admin).CreateOpenIDConnectProvider(ctx, &iam.CreateOpenIDConnectProviderInput{
		Url: aws.String(issuer), ClientIDList: []string{"sts.amazonaws.com"}, ThumbprintList: []string{strings.Repeat("a", 40)},
	}); err != nil {
		t.Fatal(err)
	}
	secret, err := json.Marshal(access.ClusterSecret{Endpoint: w.kube.Config.Host,
		CAData: base64.StdEncoding.EncodeToString(w.kube.Config.CAData), Token: w.token(t, "joiner-functions")})
	if err != nil {
		t.Fatal(err)
	}
	out, err := secretsmanager.NewFromConfig(w.admin).CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name: aws.String("joiner/" + clusterName), SecretString: aws.String(string(secret))})
	if err != nil {
		t.Fatal(err)
	}
	w.secret = aws.ToString(out.ARN)
}

// deployScript runs scripts/deploy-local.sh against the test's moto.
func (w *world) deployScript(t *testing.T, args ...string) string {
	t.Helper()
	out, err := w.runDeployScript(args...)
	if err != nil {
		t.Fatalf("scripts/deploy-local.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// runDeployScript is deployScript for a run that may fail: its output and error.
func (w *world) runDeployScript(args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{filepath.Join(w.root, "scripts", "deploy-local.sh")}, args...)...)
	cmd.Dir = w.root
	cmd.Env = append(os.Environ(), "MOTO_ENDPOINT="+w.moto.URL)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// deploy runs `cdk bootstrap` (once for both) and `cdk deploy` of the world's example
// stack with the pinned CLI (scripts/deploy-local.sh, as make deploy-local does),
// pointed at this account's OIDC provider, the host-built bootstraps and, for the
// self-managed cluster, its secret.
func (w *world) deploy(t *testing.T) {
	defer phase(t, "cdk deploy "+w.kind)()
	w.outDir = filepath.Join(w.dir, "deploy-"+w.cluster)
	w.context = []string{"-c", "clusterName=" + w.cluster, "-c", "clusterKind=" + w.kind,
		"-c", "oidcProviderArn=arn:aws:iam::" + account + ":oidc-provider/" + strings.TrimPrefix(issuer, "https://"),
		"-c", "distDir=" + filepath.Join(w.dir, "dist")}
	if w.kind == "self-managed" {
		w.context = append(w.context, "-c", "clusterSecretArn="+w.secret, "-c", "serviceCidr="+serviceCIDR)
	}
	out := w.deployScript(t, append([]string{"deploy", w.outDir}, w.context...)...)
	b, err := os.ReadFile(filepath.Join(w.outDir, "outputs.json"))
	if err != nil {
		t.Fatalf("no outputs.json: %v\n%s", err, out)
	}
	var all map[string]map[string]string
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatal(err)
	}
	for stack, outs := range all {
		w.stack, w.outputs = stack, outs
	}
	if w.stack != "Joiner-"+w.cluster {
		t.Fatalf("deployed stacks %v, want Joiner-%s", all, w.cluster)
	}
	tb, err := os.ReadFile(filepath.Join(w.outDir, "cdk.out", w.stack+".template.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(tb, &w.tmpl); err != nil {
		t.Fatal(err)
	}
	t.Logf("deployed %s: outputs %v", w.stack, w.outputs)
	t.Log(w.deployScript(t, "uncreated", w.outDir, w.stack))
}

// awsCLI runs the AWS CLI against moto as the administrator and decodes its JSON.
func (w *world) awsCLI(t *testing.T, v any, args ...string) {
	t.Helper()
	cmd := exec.Command("aws", append([]string{"--endpoint-url", w.moto.URL, "--region", region, "--output", "json"}, args...)...)
	none := filepath.Join(w.dir, "none")
	// moto's test user: these calls run while IAM is not enforced.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + w.dir, "AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing",
		"AWS_CONFIG_FILE=" + none, "AWS_SHARED_CREDENTIALS_FILE=" + none, "AWS_EC2_METADATA_DISABLED=true"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("aws %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	// An empty list is no output at all (aws sqs list-queues).
	if v != nil && len(bytes.TrimSpace(out)) > 0 {
		if err := json.Unmarshal(out, v); err != nil {
			t.Fatalf("aws %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// enforce makes the administrator an IAM user (moto then authenticates every
// request) and turns IAM enforcement on.
func (w *world) enforce(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ic := iam.NewFromConfig(w.admin)
	if _, err := ic.CreateUser(ctx, &iam.CreateUserInput{UserName: aws.String("admin")}); err != nil {
		t.Fatal(err)
	}
	if _, err := ic.PutUserPolicy(ctx, &iam.PutUserPolicyInput{UserName: aws.String("admin"), PolicyName: aws.String("all"),
		PolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}`)}); err != nil {
		t.Fatal(err)
	}
	key, err := ic.CreateAccessKey(ctx, &iam.CreateAccessKeyInput{UserName: aws.String("admin")})
	if err != nil {
		t.Fatal(err)
	}
	w.adminKey = [2]string{aws.ToString(key.AccessKey.AccessKeyId), aws.ToString(key.AccessKey.SecretAccessKey)}
	w.admin.Credentials = credentials.NewStaticCredentialsProvider(w.adminKey[0], w.adminKey[1], "")
	w.ec2 = ec2.NewFromConfig(w.admin)
	if err := w.moto.EnforceIAM(ctx); err != nil {
		t.Fatal(err)
	}
}

// assume returns the credentials of role as sts:AssumeRole on moto gives them: what
// Lambda puts in a function's environment.
func (w *world) assume(t *testing.T, role, session string) aws.Credentials {
	t.Helper()
	out, err := sts.NewFromConfig(w.admin).AssumeRole(context.Background(), &sts.AssumeRoleInput{
		RoleArn: aws.String(role), RoleSessionName: aws.String(session), DurationSeconds: aws.Int32(3600)})
	if err != nil {
		t.Fatalf("assume %s: %v", role, err)
	}
	c := out.Credentials
	return aws.Credentials{AccessKeyID: aws.ToString(c.AccessKeyId), SecretAccessKey: aws.ToString(c.SecretAccessKey), SessionToken: aws.ToString(c.SessionToken)}
}

// as is an SDK configuration with creds.
func (w *world) as(creds aws.Credentials) aws.Config {
	c := w.admin.Copy()
	c.Credentials = credentials.StaticCredentialsProvider{Value: creds}
	return c
}

// readFunctions reads each deployed function back (GetFunctionConfiguration), fetches
// the code the stack uploaded (checking it against the deployed CodeSha256) and
// assumes its execution role. (Before enforcement: moto 5.2.1 refuses the AWS CLI's
// Lambda requests as SignatureDoesNotMatch once it authenticates them.)
func (w *world) readFunctions(t *testing.T) {
	defer phase(t, "read the deployed functions of "+w.kind)()
	for _, f := range functions {
		id := strings.ToUpper(f[:1]) + f[1:]
		d := &deployed{name: f, fnName: w.outputs[id+"FunctionName"]}
		if d.fnName == "" {
			t.Fatalf("no %sFunctionName output: %v", id, w.outputs)
		}
		w.awsCLI(t, &d.config, "lambda", "get-function-configuration", "--function-name", d.fnName)
		c := d.config
		if c.Runtime != "provided.al2023" || c.Handler != "bootstrap" || c.Role != w.outputs["FunctionsRoleArn"] || c.Timeout == 0 ||
			c.Environment.Variables[access.EnvMode] != w.kind {
			t.Fatalf("%s deployed as %+v", f, c)
		}
		d.boot = w.fetchCode(t, id, c.CodeSha256)
		d.creds = w.assume(t, c.Role, d.fnName)
		w.fns[f] = d
	}
}

// startFunctions runs the deployed bootstraps of fns under the emulator with the
// deployed environment and the deployed role's credentials.
func (w *world) startFunctions(t *testing.T, fns ...string) {
	defer phase(t, "functions under the RIE")()
	for _, f := range fns {
		d := w.fns[f]
		c, creds := d.config, d.creds
		// What Lambda's provided.al2023 runtime gives the bootstrap, plus the
		// endpoint override that points the SDK at the emulated account.
		env := []string{"PATH=/usr/bin:/bin", "AWS_REGION=" + region, "AWS_DEFAULT_REGION=" + region,
			"AWS_ACCESS_KEY_ID=" + creds.AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + creds.SecretAccessKey, "AWS_SESSION_TOKEN=" + creds.SessionToken,
			"AWS_LAMBDA_FUNCTION_NAME=" + c.FunctionName, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=" + fmt.Sprint(c.MemorySize),
			"AWS_LAMBDA_FUNCTION_TIMEOUT=" + fmt.Sprint(c.Timeout),
			"AWS_ENDPOINT_URL=" + w.moto.URL, "AWS_EC2_METADATA_DISABLED=true",
			"AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent"}
		// Lambda's advanced logging controls reach the runtime as these two.
		if c.LoggingConfig.LogFormat != "" {
			env = append(env, "AWS_LAMBDA_LOG_FORMAT="+c.LoggingConfig.LogFormat)
		}
		if c.LoggingConfig.ApplicationLogLevel != "" {
			env = append(env, "AWS_LAMBDA_LOG_LEVEL="+c.LoggingConfig.ApplicationLogLevel)
		}
		keys := make([]string, 0, len(c.Environment.Variables))
		for k := range c.Environment.Variables {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			env = append(env, k+"="+c.Environment.Variables[k])
		}
		t.Logf("%s: %s, %d MB, %d s, role %s, env %v", f, c.FunctionName, c.MemorySize, c.Timeout, c.Role, keys)
		d.emu = lambdatest.StartEmulator(t, w.rie, w.cluster+" "+f, d.boot, env)
	}
}

// fetchCode downloads function id's asset from the CDK bootstrap bucket (as the
// template names it), checks it is the code Lambda holds, and unpacks its bootstrap.
func (w *world) fetchCode(t *testing.T, id, sha string) string {
	t.Helper()
	res, _ := w.tmpl["Resources"].(map[string]any)[id].(map[string]any)
	code, _ := res["Properties"].(map[string]any)["Code"].(map[string]any)
	key, _ := code["S3Key"].(string)
	if key == "" {
		t.Fatalf("%s: no S3Key in the template's Code: %v", id, code)
	}
	bucket := "cdk-hnb659fds-assets-" + account + "-" + region
	zipPath := filepath.Join(w.outDir, id+".zip")
	w.awsCLI(t, nil, "s3api", "get-object", "--bucket", bucket, "--key", key, zipPath)
	b, err := os.ReadFile(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if got := base64.StdEncoding.EncodeToString(sum[:]); got != sha {
		t.Fatalf("%s: s3://%s/%s has sha256 %s, the deployed function's CodeSha256 is %s", id, bucket, key, got, sha)
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(w.outDir, "code", id, "bootstrap")
	for _, f := range zr.File {
		if f.Name != "bootstrap" {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, rc); err != nil {
			t.Fatal(err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	t.Fatalf("%s: the deployed zip holds no bootstrap", id)
	return ""
}

// startForwarder runs cmd/forwarder as its Deployment would: its ServiceAccount's
// token for the API server, IRSA for AWS (a projected token of audience
// sts.amazonaws.com, AWS_ROLE_ARN the deployed forwarder role), the deployed bus.
func (w *world) startForwarder(t *testing.T) *lambdatest.Process {
	t.Helper()
	dir := filepath.Join(w.dir, "forwarder")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	cfg := &rest.Config{Host: w.kube.Config.Host, BearerToken: w.token(t, "joiner-forwarder"),
		TLSClientConfig: rest.TLSClientConfig{CAData: w.kube.Config.CAData}}
	if err := kubetest.WriteKubeconfig(cfg, kc); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(w.token(t, "joiner-forwarder", "sts.amazonaws.com")), 0o600); err != nil {
		t.Fatal(err)
	}
	health := lambdatest.FreeAddr(t)
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "KUBECONFIG=" + kc,
		"JOINER_CLUSTER_NAME=" + w.cluster, "JOINER_EVENT_BUS=" + w.outputs["EventBusName"],
		"FORWARDER_IDLE=300ms", "FORWARDER_MAX_WAIT=2s", "FORWARDER_HEALTH_ADDR=" + health, "LOG_LEVEL=debug",
		// What EKS's pod identity webhook injects for IRSA.
		"AWS_REGION=" + region, "AWS_ROLE_ARN=" + w.outputs["ForwarderRoleArn"], "AWS_WEB_IDENTITY_TOKEN_FILE=" + tokenFile,
		// The SDK's web-identity provider calls STS with its own client: it needs the
		// STS endpoint override too, not only EventBridge's.
		"AWS_ENDPOINT_URL_EVENTBRIDGE=" + w.moto.URL, "AWS_ENDPOINT_URL_STS=" + w.moto.URL,
		"AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent", "AWS_EC2_METADATA_DISABLED=true"}
	p := lambdatest.StartProcess(t, "forwarder", dir, env, w.bins["forwarder"])
	p.WaitListening(t, health, 30*time.Second)
	return p
}

// delivery is one event moto's EventBridge delivered to a Lambda target.
type delivery struct {
	Rule   string          `json:"rule"`
	Target string          `json:"target"`
	Event  json.RawMessage `json:"event"`
}

// nextDelivery waits for the next event delivered to fn's function (deliveries to
// other targets are skipped) and returns it.
func (w *world) nextDelivery(t *testing.T, fn string, timeout time.Duration) delivery {
	t.Helper()
	arn := w.fns[fn].config.FunctionArn
	deadline := time.Now().Add(timeout)
	for {
		b, _ := os.ReadFile(w.deliveries)
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		w.mu.Lock()
		for w.deliveredUpTo < len(lines) && lines[w.deliveredUpTo] != "" {
			var d delivery
			line := lines[w.deliveredUpTo]
			w.deliveredUpTo++
			if err := json.Unmarshal([]byte(line), &d); err != nil {
				w.mu.Unlock()
				t.Fatalf("delivery %q: %v", line, err)
			}
			if d.Target == arn {
				w.mu.Unlock()
				return d
			}
		}
		w.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no event delivered to %s within %v", fn, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// invoke posts event to fn under the emulator and returns its decision summary,
// failing on an error answer.
func (w *world) invoke(t *testing.T, fn string, event []byte) handlers.Summary {
	t.Helper()
	d := w.fns[fn]
	start := time.Now()
	r := d.emu.Post(t, event, time.Duration(d.config.Timeout+30)*time.Second)
	d.invoked++
	var le lambdatest.Error
	_ = json.Unmarshal(r.Body, &le)
	if r.Status != 200 || le.ErrorMessage != "" {
		t.Fatalf("%s: HTTP %d %s\nits output:\n%s", fn, r.Status, r.Body, d.emu.Stdout.String()[r.LogFrom:])
	}
	var s handlers.Summary
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("%s: not a summary (%v): %s", fn, err, r.Body)
	}
	if len(s.Errors) > 0 {
		t.Fatalf("%s: summary with errors %v\nits output:\n%s", fn, s.Errors, d.emu.Stdout.String()[r.LogFrom:])
	}
	t.Logf("%s (%s) in %.1f s: %s", fn, s.Event, time.Since(start).Seconds(), s.Action)
	return s
}

// schedule returns the payload the stack's schedule id delivers (EventBridge
// Scheduler's context attributes filled in as Scheduler fills them): moto's
// CloudFormation does not create AWS::Scheduler::Schedule, so the test delivers it.
func (w *world) schedule(t *testing.T, id string) []byte {
	t.Helper()
	res, _ := w.tmpl["Resources"].(map[string]any)[id].(map[string]any)
	target, _ := res["Properties"].(map[string]any)["Target"].(map[string]any)
	input := resolve(t, target["Input"])
	now := time.Now().UTC()
	r := strings.NewReplacer("<aws.scheduler.execution-id>", fmt.Sprintf("%s-%d", id, now.UnixNano()),
		"<aws.scheduler.scheduled-time>", now.Format(time.RFC3339),
		"<aws.scheduler.schedule-arn>", "arn:aws:scheduler:"+region+":"+account+":schedule/default/"+id,
		"<aws.scheduler.attempt-number>", "1")
	return []byte(r.Replace(input))
}

// resolve renders a template value made of strings, Fn::Join and the pseudo
// parameters.
func resolve(t *testing.T, v any) string {
	t.Helper()
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		if ref, ok := x["Ref"].(string); ok {
			switch ref {
			case "AWS::AccountId":
				return account
			case "AWS::Region":
				return region
			case "AWS::Partition":
				return "aws"
			}
		}
		if j, ok := x["Fn::Join"].([]any); ok && len(j) == 2 {
			parts, _ := j[1].([]any)
			var b strings.Builder
			for i, p := range parts {
				if i > 0 {
					b.WriteString(j[0].(string))
				}
				b.WriteString(resolve(t, p))
			}
			return b.String()
		}
	}
	t.Fatalf("cannot resolve %v", v)
	return ""
}

// kubelet plays the kubelets of the instances Joiner launches: for a NodeClaim with
// a provider ID whose instance runs in the account, it registers the Node the user
// data would (kubesim.KubeletNode: labels, startup taints, capacity), managed by
// KWOK (heartbeats, pods), Ready, without the not-ready taint admission adds (the
// node lifecycle controller would lift it). It runs until ctx ends.
func (w *world) kubelet(ctx context.Context, t *testing.T) {
	cat := catalog.Embedded()
	registered := map[string]bool{}
	for ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
		list, err := w.dyn.Resource(kube.NodeClaimGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, u := range list.Items {
			var nc karpenter.NodeClaim
			if err := runtimeFromUnstructured(u, &nc); err != nil || nc.Status.ProviderID == "" || registered[nc.Status.ProviderID] ||
				nc.DeletionTimestamp != nil {
				continue
			}
			id := facts.InstanceID(nc.Status.ProviderID)
			out, err := w.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
			if err != nil || len(out.Reservations) == 0 || len(out.Reservations[0].Instances) == 0 {
				continue
			}
			in := out.Reservations[0].Instances[0]
			if in.State == nil || in.State.Name != ec2types.InstanceStateNameRunning {
				continue
			}
			ct := karpenter.CapacityTypeOnDemand
			if in.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
				ct = karpenter.CapacityTypeSpot
			}
			node := kubesim.KubeletNode(&nc, awssim.Instance{ID: id, InstanceType: string(in.InstanceType),
				Zone: aws.ToString(in.Placement.AvailabilityZone), CapacityType: ct}, nil, cat, time.Now())
			node.Annotations = map[string]string{kubetest.KWOKAnnotation: "fake"}
			if err := w.register(ctx, node); err != nil {
				t.Logf("kubelet: register %s: %v", node.Name, err)
				continue
			}
			registered[nc.Status.ProviderID] = true
			t.Logf("kubelet: node %s registered for NodeClaim %s (%s %s in %s)", node.Name, nc.Name, in.InstanceType, ct, node.Labels["topology.kubernetes.io/zone"])
		}
	}
}

// register creates node, writes its status and lifts admission's not-ready taint.
func (w *world) register(ctx context.Context, node *corev1.Node) error {
	status := node.Status
	out, err := w.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err != nil {
		return nil
	}
	out.Status = status
	if out, err = w.cs.CoreV1().Nodes().UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil {
		return err
	}
	out.Spec.Taints = slices.DeleteFunc(out.Spec.Taints, func(tn corev1.Taint) bool {
		return strings.HasPrefix(tn.Key, "node.kubernetes.io/")
	})
	_, err = w.cs.CoreV1().Nodes().Update(ctx, out, metav1.UpdateOptions{})
	return err
}

// replicas plays the ReplicaSet controller for the test's workloads: it keeps count
// pods labelled app=name in ns (pods deleted by a drain are recreated). Setting a
// count to 0 deletes its pods.
type replicas struct {
	w     *world
	ns    string
	mu    sync.Mutex
	want  map[string]int
	specs map[string]corev1.PodSpec
	seq   int
}

func (r *replicas) set(name string, count int, spec corev1.PodSpec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.want[name], r.specs[name] = count, spec
}

func (r *replicas) run(ctx context.Context, t *testing.T) {
	for ctx.Err() == nil {
		r.reconcile(ctx, t)
		time.Sleep(200 * time.Millisecond)
	}
}

func (r *replicas) reconcile(ctx context.Context, t *testing.T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, want := range r.want {
		pods, err := r.w.cs.CoreV1().Pods(r.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return
		}
		var live []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				live = append(live, p)
			}
		}
		for i := len(live); i < want; i++ {
			r.seq++
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, r.seq), Namespace: r.ns,
				Labels: map[string]string{"app": name}}, Spec: r.specs[name]}
			if _, err := r.w.cs.CoreV1().Pods(r.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil && ctx.Err() == nil {
				t.Logf("replicas: create %s: %v", p.Name, err)
			}
		}
		zero := int64(0)
		for i := want; i < len(live); i++ {
			_ = r.w.cs.CoreV1().Pods(r.ns).Delete(ctx, live[i].Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
	}
}

// iamDecision is one line of moto_iam.py's log.
type iamDecision struct {
	Principal string `json:"principal"`
	Role      string `json:"role"`
	Request   string `json:"request"`
	Result    string `json:"result"`
	Detail    string `json:"detail"`
	Refused   *struct {
		Action   string `json:"action"`
		Resource string `json:"resource"`
	} `json:"refused"`
	Checks []struct {
		Action   string `json:"action"`
		Resource string `json:"resource"`
	} `json:"checks"`
}

// decisions reads moto_iam.py's log from line from on.
func (w *world) decisions(t *testing.T, from int) []iamDecision {
	t.Helper()
	f, err := os.Open(w.iamLog)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []iamDecision
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 0; sc.Scan(); n++ {
		if n < from {
			continue
		}
		var d iamDecision
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("moto IAM log line %d: %v", n, err)
		}
		out = append(out, d)
	}
	return out
}

// eventBridge is an EventBridge client as creds.
func (w *world) eventBridge(creds *aws.Credentials) *eventbridge.Client {
	if creds == nil {
		return eventbridge.NewFromConfig(w.admin)
	}
	return eventbridge.NewFromConfig(w.as(*creds))
}

// waitFor polls cond every 200 ms until it holds or timeout passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (last: %s)", what, timeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func runtimeFromUnstructured(u unstructured.Unstructured, v any) error {
	b, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
