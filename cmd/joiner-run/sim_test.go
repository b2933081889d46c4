package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
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
