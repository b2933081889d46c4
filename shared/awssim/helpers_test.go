package awssim

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
)

// testTypes is the small catalog of the simulator-only tests: real facts and
// prices from the embedded catalog, few enough to reason about.
var testTypes = []string{
	"m6i.large", "m6i.xlarge", "m6i.2xlarge", "m6i.4xlarge", "m6i.8xlarge", "m6i.12xlarge",
	"m7i.large", "m7i.xlarge", "m7g.large", "c6i.large", "c7g.large", "g6.xlarge", "g6.2xlarge", "t3.micro",
}

func testCatalog(t testing.TB) *catalog.Catalog {
	t.Helper()
	keep := map[string]bool{}
	for _, n := range testTypes {
		keep[n] = true
	}
	c := catalog.Embedded().Filter(func(it *catalog.InstanceType) bool { return keep[it.Name] })
	if len(c.InstanceTypes) != len(testTypes) {
		t.Fatalf("embedded catalog has %d of the %d test instance types", len(c.InstanceTypes), len(testTypes))
	}
	return c
}

var testEpoch = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// startSim starts a simulator on loopback with the test catalog and a fake clock.
func startSim(t testing.TB, mod func(*Config)) (*Sim, *FakeClock) {
	t.Helper()
	clk := NewFakeClock(testEpoch)
	cfg := Config{Catalog: testCatalog(t), Clock: clk}
	if mod != nil {
		mod(&cfg)
	}
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start simulator: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, clk
}

// fastRetries keeps the SDK's standard retry rules (which errors retry, how
// many attempts) but shortens the backoff so tests stay fast.
func fastRetries(cfg aws.Config) aws.Config {
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 5 * time.Millisecond, nil })
		})
	}
	return cfg
}

type clients struct {
	ec2 *ec2.Client
	ssm *ssm.Client
	eks *eks.Client
	sm  *secretsmanager.Client
}

func newClients(cfg aws.Config) clients {
	return clients{ec2: ec2.NewFromConfig(cfg), ssm: ssm.NewFromConfig(cfg), eks: eks.NewFromConfig(cfg), sm: secretsmanager.NewFromConfig(cfg)}
}

// apiErr returns the code and HTTP status of an SDK error.
func apiErr(t testing.TB, err error) (string, int) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected an API error, got none")
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("expected an API error, got %T: %v", err, err)
	}
	status := 0
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	return ae.ErrorCode(), status
}

func wantAPIErr(t testing.TB, err error, code string, status int) {
	t.Helper()
	gotCode, gotStatus := apiErr(t, err)
	if gotCode != code || (status != 0 && gotStatus != status) {
		t.Fatalf("error = %s (HTTP %d), want %s (HTTP %d); full error: %v", gotCode, gotStatus, code, status, err)
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

var _ = http.StatusOK
