package awsjson_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/joiner-autoscaler/joiner/shared/awsjson"
	"github.com/joiner-autoscaler/joiner/shared/awssim"
)

// fastRetries is the SDK's standard retryer with short backoffs, so retried
// throttling is quick to test.
func fastRetries(attempts int) func() aws.Retryer {
	return func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = attempts
			o.MaxBackoff = time.Millisecond
		})
	}
}

func startSim(t *testing.T, seed awssim.Seed) *awssim.Sim {
	t.Helper()
	sim, err := awssim.Start(context.Background(), awssim.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	if err := sim.Apply(seed); err != nil {
		t.Fatal(err)
	}
	return sim
}

// TestAgainstSimulator round-trips each call through awssim, which reads the
// SigV4 scope and the X-Amz-Target as AWS does.
func TestAgainstSimulator(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t, awssim.Seed{
		NoPublicParameters: true,
		Parameters:         []awssim.Parameter{{Name: "/joiner/ami", Value: "ami-0123456789abcdef0"}},
		Secrets:            []awssim.Secret{{Name: "kubean/cluster", Value: `{"endpoint":"https://10.0.0.1:6443"}`}},
		Clusters: []awssim.Cluster{{Name: "prod", Version: "1.31", Endpoint: "https://prod.eks.example",
			CertificateAuthority: "Q0E=", ServiceIPv4CIDR: "172.20.0.0/16"}},
	})
	cfg := sim.AWSConfig()
	cfg.Retryer = fastRetries(3)

	ssm := awsjson.NewSSM(cfg)
	p, err := ssm.GetParameter(ctx, "/joiner/ami")
	if err != nil || p.Value != "ami-0123456789abcdef0" || p.Name != "/joiner/ami" || p.Version != 1 {
		t.Fatalf("GetParameter = %+v, %v", p, err)
	}
	v, err := ssm.PutParameter(ctx, awsjson.PutParameterInput{Name: "/joiner/prod/shadow-memory", Value: `{"a":1}`})
	if err != nil || v != 1 {
		t.Fatalf("PutParameter = %d, %v", v, err)
	}
	if _, err := ssm.PutParameter(ctx, awsjson.PutParameterInput{Name: "/joiner/prod/shadow-memory", Value: "x"}); awsjson.Code(err) != "ParameterAlreadyExists" {
		t.Errorf("PutParameter without Overwrite over an existing parameter: %v, want ParameterAlreadyExists", err)
	}
	if v, err := ssm.PutParameter(ctx, awsjson.PutParameterInput{Name: "/joiner/prod/shadow-memory", Value: `{"a":2}`, Overwrite: true}); err != nil || v != 2 {
		t.Errorf("PutParameter Overwrite = %d, %v; want version 2", v, err)
	}
	if p, err := ssm.GetParameter(ctx, "/joiner/prod/shadow-memory"); err != nil || p.Value != `{"a":2}` {
		t.Errorf("read back = %+v, %v", p, err)
	}
	_, err = ssm.GetParameter(ctx, "/nope")
	var apiErr *awsjson.Error
	if !errors.As(err, &apiErr) || apiErr.Code != "ParameterNotFound" || apiErr.StatusCode != http.StatusBadRequest ||
		!strings.HasPrefix(err.Error(), "SSM GetParameter /nope: ParameterNotFound (HTTP 400)") {
		t.Errorf("missing parameter: %v (%+v)", err, apiErr)
	}

	sec, err := awsjson.NewSecretsManager(cfg).GetSecretValue(ctx, "kubean/cluster")
	if err != nil || sec.SecretString != `{"endpoint":"https://10.0.0.1:6443"}` || !strings.HasPrefix(sec.ARN, "arn:aws:secretsmanager:") {
		t.Errorf("GetSecretValue = %+v, %v", sec, err)
	}
	if _, err := awsjson.NewSecretsManager(cfg).GetSecretValue(ctx, "nope"); awsjson.Code(err) != "ResourceNotFoundException" ||
		!strings.Contains(err.Error(), "Secrets Manager GetSecretValue nope: ResourceNotFoundException") {
		t.Errorf("missing secret: %v", err)
	}

	eks := awsjson.NewEKS(cfg)
	c, err := eks.DescribeCluster(ctx, "prod")
	if err != nil || c.Endpoint != "https://prod.eks.example" || c.Version != "1.31" || c.CertificateAuthority.Data != "Q0E=" ||
		c.KubernetesNetworkConfig.ServiceIPv4CIDR != "172.20.0.0/16" || c.Status != "ACTIVE" {
		t.Errorf("DescribeCluster = %+v, %v", c, err)
	}
	if _, err := eks.DescribeCluster(ctx, "nope"); awsjson.Code(err) != "ResourceNotFoundException" ||
		!strings.Contains(err.Error(), "EKS DescribeCluster nope: ResourceNotFoundException (HTTP 404)") {
		t.Errorf("missing cluster: %v", err)
	}

	// Throttling is retried with the configured retryer, each attempt numbered as
	// the SDK numbers it; past MaxAttempts the error names the call and the code.
	sim.ResetCalls()
	sim.Throttle("GetParameter", 2)
	if _, err := ssm.GetParameter(ctx, "/joiner/ami"); err != nil {
		t.Fatalf("two throttles, three attempts: %v", err)
	}
	var attempts []int
	for _, c := range sim.Calls() {
		attempts = append(attempts, c.Attempt)
	}
	if fmt.Sprint(attempts) != "[1 2 3]" || sim.CountCalls("GetParameter", "ThrottlingException") != 2 {
		t.Errorf("attempts %v, throttled %d; want [1 2 3] and 2", attempts, sim.CountCalls("GetParameter", "ThrottlingException"))
	}
	sim.Throttle("DescribeCluster", 5)
	_, err = eks.DescribeCluster(ctx, "prod")
	if awsjson.Code(err) != "ThrottlingException" || !strings.Contains(err.Error(), "EKS DescribeCluster prod: ThrottlingException (HTTP 429)") ||
		!strings.Contains(err.Error(), "gave up after 3 attempts") {
		t.Errorf("throttled past MaxAttempts: %v", err)
	}
}

// hostile serves fixed answers and counts requests.
type hostile struct {
	n      atomic.Int32
	answer func(n int, w http.ResponseWriter, r *http.Request)
}

func (h *hostile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.answer(int(h.n.Add(1)), w, r)
}

func hostileConfig(t *testing.T, h http.Handler) aws.Config {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return aws.Config{
		Region:       "eu-west-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", "TOKEN"),
		BaseEndpoint: aws.String(srv.URL),
		Retryer:      fastRetries(3),
	}
}

// TestHostileAnswers: every answer that is not what the API promises becomes an
// error naming the call; none is half-read into a value.
func TestHostileAnswers(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		answer   func(n int, w http.ResponseWriter, r *http.Request)
		want     string // in the error
		code     string // awsjson.Code
		requests int32
	}{
		{"malformed JSON", func(_ int, w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, `{"Parameter":{"Name":"/x","Value":`)
		}, "SSM GetParameter /x: malformed answer (HTTP 200", "", 1},
		{"wrong types", func(_ int, w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, `{"Parameter":{"Name":"/x","Value":42}}`)
		}, "SSM GetParameter /x: malformed answer", "", 1},
		{"empty answer", func(_ int, w http.ResponseWriter, _ *http.Request) {}, "SSM GetParameter /x: empty answer", "", 1},
		{"no Parameter", func(_ int, w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, `{}`)
		}, "SSM GetParameter /x: answer has no Parameter", "", 1},
		{"oversized", func(_ int, w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, `{"Parameter":{"Name":"/x","Value":"%s"}}`, strings.Repeat("a", 2<<20))
		}, "SSM GetParameter /x: answer larger than 1048576 bytes refused", "", 1},
		{"HTML from a proxy, retried as a 502", func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprint(w, "<html><body>Bad Gateway</body></html>")
		}, `SSM GetParameter /x: BadGateway (HTTP 502): answer is not JSON: "<html><body>Bad Gateway</body></html>"`, "BadGateway", 3},
		{"throttled every time", func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("X-Amzn-RequestId", "req-1")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"__type":"com.amazonaws.ssm#ThrottlingException","message":"Rate exceeded"}`)
		}, "SSM GetParameter /x: ThrottlingException (HTTP 400): Rate exceeded [request req-1] (gave up after 3 attempts)", "ThrottlingException", 3},
		{"429 without a code", func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusTooManyRequests)
		}, "SSM GetParameter /x: TooManyRequests (HTTP 429)", "TooManyRequests", 3},
		{"code in the header wins", func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("X-Amzn-ErrorType", "AccessDeniedException:http://internal.amazon.com/")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"__type":"Other","Message":"not allowed"}`)
		}, "SSM GetParameter /x: AccessDeniedException (HTTP 400): not allowed", "AccessDeniedException", 1},
		{"connection dropped, then an answer", func(n int, w http.ResponseWriter, _ *http.Request) {
			if n == 1 {
				conn, _, _ := w.(http.Hijacker).Hijack()
				conn.Close()
				return
			}
			fmt.Fprint(w, `{"Parameter":{"Name":"/x","Value":"ok"}}`)
		}, "", "", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &hostile{answer: tc.answer}
			_, err := awsjson.NewSSM(hostileConfig(t, h)).GetParameter(ctx, "/x")
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("err = %v, want success", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v\nwant it to contain %q", err, tc.want)
			}
			if got := awsjson.Code(err); got != tc.code {
				t.Errorf("Code = %q, want %q", got, tc.code)
			}
			if got := h.n.Load(); got != tc.requests {
				t.Errorf("%d requests, want %d", got, tc.requests)
			}
		})
	}
}

// TestRequestShape: the request is what AWS reads: POST / with the target, the
// JSON 1.1 content type, a SigV4 signature scoped to the region and service, the
// session token; EKS is a GET of the escaped path.
func TestRequestShape(t *testing.T) {
	var got []*http.Request
	h := &hostile{answer: func(_ int, w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Clone(context.Background()))
		if r.Method == http.MethodGet {
			fmt.Fprint(w, `{"cluster":{"name":"a_b","endpoint":"https://x"}}`)
			return
		}
		fmt.Fprint(w, `{"Parameter":{"Name":"/x","Value":"v"}}`)
	}}
	cfg := hostileConfig(t, h)
	if _, err := awsjson.NewSSM(cfg).GetParameter(context.Background(), "/x"); err != nil {
		t.Fatal(err)
	}
	if _, err := awsjson.NewEKS(cfg).DescribeCluster(context.Background(), "a_b"); err != nil {
		t.Fatal(err)
	}
	r := got[0]
	auth := r.Header.Get("Authorization")
	if r.Method != http.MethodPost || r.URL.Path != "/" || r.Header.Get("X-Amz-Target") != "AmazonSSM.GetParameter" ||
		r.Header.Get("Content-Type") != "application/x-amz-json-1.1" || r.Header.Get("X-Amz-Security-Token") != "TOKEN" ||
		!strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKID/") || !strings.Contains(auth, "/eu-west-1/ssm/aws4_request") ||
		r.Header.Get("amz-sdk-request") != "attempt=1; max=3" {
		t.Errorf("SSM request: %s %s %v", r.Method, r.URL.Path, r.Header)
	}
	r = got[1]
	if r.Method != http.MethodGet || r.URL.Path != "/clusters/a_b" || !strings.Contains(r.Header.Get("Authorization"), "/eu-west-1/eks/aws4_request") {
		t.Errorf("EKS request: %s %s %v", r.Method, r.URL.Path, r.Header)
	}
}

func TestRegionalEndpoint(t *testing.T) {
	for region, want := range map[string]string{
		"us-east-1":      "https://ssm.us-east-1.amazonaws.com",
		"cn-north-1":     "https://ssm.cn-north-1.amazonaws.com.cn",
		"us-iso-east-1":  "https://ssm.us-iso-east-1.c2s.ic.gov",
		"us-isob-east-1": "https://ssm.us-isob-east-1.sc2s.sgov.gov",
	} {
		got, err := awsjson.New(aws.Config{Region: region}, awsjson.SSMService).Endpoint()
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", region, got, err, want)
		}
	}
	if _, err := awsjson.NewSSM(aws.Config{Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")}).GetParameter(context.Background(), "/x"); err == nil ||
		!strings.Contains(err.Error(), "SSM GetParameter /x: no region configured") {
		t.Errorf("no region: %v", err)
	}
}

// TestCanceledWhileBackingOff: a cancelled context ends the retries at once.
func TestCanceledWhileBackingOff(t *testing.T) {
	h := &hostile{answer: func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}}
	cfg := hostileConfig(t, h)
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = 10; o.MaxBackoff = time.Hour })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := awsjson.NewSSM(cfg).GetParameter(ctx, "/x")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "SSM GetParameter /x: ") || time.Since(start) > 10*time.Second {
		t.Errorf("err = %v after %v", err, time.Since(start))
	}
}
