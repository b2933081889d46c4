package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
)

// lockedBuffer lets the test read what the command prints while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestSimServeAnswersTheSDK(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr lockedBuffer
	done := make(chan int)
	go func() {
		done <- dispatch(ctx, []string{"sim", "serve", "--addr", "127.0.0.1:0", "--cluster", "demo"}, &stdout, &stderr)
	}()

	var endpoint string
	for deadline := time.Now().Add(10 * time.Second); endpoint == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, f := range strings.Fields(stdout.String()) {
			if strings.HasPrefix(f, "http://127.0.0.1:") {
				endpoint = f
				break
			}
		}
	}
	if endpoint == "" {
		cancel()
		t.Fatalf("no endpoint printed; stdout %q stderr %q", stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "aws --endpoint-url "+endpoint+" ec2 ") {
		t.Errorf("stdout lacks the example aws line: %q", stdout.String())
	}
	out, err := ssm.NewFromConfig(awssim.NewAWSConfig(endpoint)).GetParameter(ctx, &ssm.GetParameterInput{
		Name: aws.String("/aws/service/bottlerocket/aws-k8s-1.36/x86_64/latest/image_id"),
	})
	if err != nil {
		t.Fatalf("GetParameter against joiner sim serve: %v", err)
	}
	if !strings.HasPrefix(aws.ToString(out.Parameter.Value), "ami-") {
		t.Errorf("bottlerocket parameter = %q", aws.ToString(out.Parameter.Value))
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit code %d after cancel; stderr %q", code, stderr.String())
	}
}

func TestSimServeRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:4566", "10.1.2.3:80", ":4566", "example.com:80"} {
		var stdout, stderr bytes.Buffer
		code := dispatch(context.Background(), []string{"sim", "serve", "--addr", addr}, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "loopback") {
			t.Errorf("--addr %s: exit %d, stderr %q; want exit 2 naming loopback", addr, code, stderr.String())
		}
	}
}

func TestSimUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{"sim"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "joiner sim serve") {
		t.Errorf("joiner sim: exit %d stderr %q", code, stderr.String())
	}
	stderr.Reset()
	if code := dispatch(context.Background(), []string{"sim", "serve", "--state", "/nonexistent/state.json"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "state file") {
		t.Errorf("missing state file: exit %d stderr %q", code, stderr.String())
	}
}

// The simulator refuses what EC2 refuses: RunInstances naming an instance profile
// that does not exist answers EC2's InvalidParameterValue, through the AWS CLI
// as a user would call it (or, without the CLI, through the SDK's EC2 client,
// which signs and encodes the call the same way). A profile made through IAM
// (create-instance-profile, add-role-to-instance-profile) then launches. Under
// `make test` (JOINER_REQUIRE_REAL_PARTS=1) or CI a missing CLI is a failure:
// the SDK stand-in would pass what the test is there to show.
func TestSimServeRefusesUnknownProfileToTheAWSCLI(t *testing.T) {
	cli, lookErr := exec.LookPath("aws")
	if lookErr != nil && (os.Getenv("CI") == "true" || os.Getenv("JOINER_REQUIRE_REAL_PARTS") == "1") {
		t.Fatalf("the aws CLI is required (CI / make test): %v", lookErr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan int)
	go func() {
		done <- dispatch(ctx, []string{"sim", "serve", "--addr", "127.0.0.1:0", "--cluster", "demo"}, &stdout, &stderr)
	}()
	defer func() { cancel(); <-done }()
	var endpoint string
	for deadline := time.Now().Add(10 * time.Second); endpoint == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, f := range strings.Fields(stdout.String()) {
			if strings.HasPrefix(f, "http://127.0.0.1:") && !strings.Contains(f, "/_sim/") {
				endpoint = f
				break
			}
		}
	}
	if endpoint == "" {
		t.Fatalf("no endpoint printed; stderr %q", stderr.String())
	}
	const subnet, image = "subnet-0a0000000000000a1", "ami-0c0ffee00000000a1" // DefaultSeed's
	run := func(profile string) (string, error) {
		if lookErr == nil {
			cmd := exec.CommandContext(ctx, cli, "--endpoint-url", endpoint, "--region", "us-east-1", "--output", "json",
				"ec2", "run-instances", "--image-id", image, "--instance-type", "m6i.large", "--subnet-id", subnet,
				"--count", "1", "--iam-instance-profile", "Name="+profile)
			cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=AKIDJOINERSIM", "AWS_SECRET_ACCESS_KEY=joiner-sim-secret", "AWS_PAGER=")
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		t.Log("aws CLI not on PATH: calling RunInstances through the SDK instead")
		_, err := ec2.NewFromConfig(awssim.NewAWSConfig(endpoint)).RunInstances(ctx, &ec2.RunInstancesInput{
			ImageId: aws.String(image), InstanceType: ec2types.InstanceTypeM6iLarge, SubnetId: aws.String(subnet),
			MinCount: aws.Int32(1), MaxCount: aws.Int32(1), IamInstanceProfile: &ec2types.IamInstanceProfileSpecification{Name: aws.String(profile)},
		})
		if err != nil {
			return err.Error(), err
		}
		return "", nil
	}
	out, err := run("no-such-profile")
	if err == nil || !strings.Contains(out, "InvalidParameterValue") || !strings.Contains(out, "Invalid IAM Instance Profile name") {
		t.Fatalf("run-instances with a missing profile: err %v, output %s; want EC2's InvalidParameterValue", err, out)
	}
	c := iam.NewFromConfig(awssim.NewAWSConfig(endpoint))
	if _, err := c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("demo-nodes")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("demo-nodes"),
		RoleName: aws.String(awssim.NodeRoleName("demo"))}); err != nil {
		t.Fatal(err)
	}
	if out, err := run("demo-nodes"); err != nil {
		t.Fatalf("run-instances with an existing profile: %v\n%s", err, out)
	}
}
