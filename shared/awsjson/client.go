// Package awsjson is a small client for the few AWS JSON calls the functions make
// outside EC2 and IAM: SSM GetParameter/PutParameter (awsJson1.1), Secrets Manager
// GetSecretValue (awsJson1.1) and EKS DescribeCluster (restJson1).
//
// Why not the generated SDK clients: each aws-sdk-go-v2 service package builds a
// schema of its whole API when the program starts (package-level smithy.NewSchema
// values for every shape of every operation), and the linker keeps all of it once
// the client is reachable. For one call each, that cost SSM ~0.92 MB, EKS ~0.33 MB
// and Secrets Manager ~0.13 MB of every Lambda bootstrap (issue 5's 20 MB limit).
// This package keeps everything else from the SDK: the SigV4 signer, the
// configured retryer (throttling and 5xx retried with its backoff and retry quota),
// the credentials provider and HTTP client of the aws.Config it is given.
//
// Every error names the service and the call ("SSM GetParameter: ..."). An API
// error carries the AWS error code ([Error.Code]; it also satisfies
// smithy.APIError, so code that asks for the code of an SDK error reads it the
// same way). A malformed or oversized answer is an error, never a half-read value.
package awsjson

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Service describes one AWS service's JSON endpoint.
type Service struct {
	// ID names the service in errors ("SSM").
	ID string
	// SigningName is SigV4's service name ("ssm").
	SigningName string
	// EndpointPrefix is the host's first label (ssm.us-east-1.amazonaws.com).
	EndpointPrefix string
	// TargetPrefix is the X-Amz-Target prefix of an awsJson1.1 service
	// ("AmazonSSM"); empty for a restJson1 service (EKS).
	TargetPrefix string
}

// The services the functions call.
var (
	SSMService            = Service{ID: "SSM", SigningName: "ssm", EndpointPrefix: "ssm", TargetPrefix: "AmazonSSM"}
	SecretsManagerService = Service{ID: "Secrets Manager", SigningName: "secretsmanager", EndpointPrefix: "secretsmanager", TargetPrefix: "secretsmanager"}
	EKSService            = Service{ID: "EKS", SigningName: "eks", EndpointPrefix: "eks"}
)

// DefaultMaxResponseBytes bounds an answer. The calls here answer a few KB (an SSM
// parameter is at most 8 KB, a secret 64 KB); a larger answer is refused, not read
// into memory.
const DefaultMaxResponseBytes = 1 << 20

// Client sends JSON calls to one service with an aws.Config's credentials,
// region, endpoint, retryer and HTTP client. The zero value is not usable: call New.
type Client struct {
	svc     Service
	cfg     aws.Config
	http    aws.HTTPClient
	signer  *v4.Signer
	retryer aws.RetryerV2
	// MaxResponseBytes bounds one answer (DefaultMaxResponseBytes when 0).
	MaxResponseBytes int64
	// Now is the signing clock (time.Now when nil).
	Now func() time.Time
}

// New returns a client for svc. cfg.BaseEndpoint, when set, replaces the
// regional endpoint (the simulator, moto_server); cfg.Retryer nil means the SDK's
// standard retryer, cfg.HTTPClient nil the SDK's default HTTP client.
func New(cfg aws.Config, svc Service) *Client {
	c := &Client{svc: svc, cfg: cfg, http: cfg.HTTPClient, signer: v4.NewSigner()}
	if c.http == nil {
		c.http = awshttp.NewBuildableClient()
	}
	var r aws.Retryer
	if cfg.Retryer != nil {
		r = cfg.Retryer()
	} else {
		r = retry.NewStandard()
	}
	if v2, ok := r.(aws.RetryerV2); ok {
		c.retryer = v2
	} else {
		c.retryer = retryerV1{r}
	}
	return c
}

// retryerV1 adapts a retryer without GetAttemptToken.
type retryerV1 struct{ aws.Retryer }

func (r retryerV1) GetAttemptToken(context.Context) (func(error) error, error) {
	return r.GetInitialToken(), nil
}

// Error is an error answer of the service.
type Error struct {
	// Service and Operation name the call ("SSM", "GetParameter"); Resource what
	// it was about (the parameter, secret or cluster name), when the caller said.
	Service, Operation, Resource string
	// StatusCode is the HTTP status.
	StatusCode int
	// Code is the AWS error code ("ParameterNotFound", "ThrottlingException");
	// for an answer without one, the HTTP status text.
	Code string
	// Message is the service's message.
	Message string
	// RequestID is the x-amzn-RequestId header.
	RequestID string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s (HTTP %d)", callName(e.Service, e.Operation, e.Resource), e.Code, e.StatusCode)
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.RequestID != "" {
		s += " [request " + e.RequestID + "]"
	}
	return s
}

// HTTPStatusCode lets the retryer retry 5xx answers.
func (e *Error) HTTPStatusCode() int { return e.StatusCode }

// Unwrap exposes the code as a smithy.APIError: the retryer reads throttling
// codes from it, and callers read the code as they read an SDK error's. It is a
// GenericAPIError on purpose: the retryer treats a 429 without a modelled error
// as throttling only when the error is generic.
func (e *Error) Unwrap() error {
	fault := smithy.FaultClient
	if e.StatusCode >= 500 {
		fault = smithy.FaultServer
	}
	return &smithy.GenericAPIError{Code: e.Code, Message: e.Message, Fault: fault}
}

// Code returns the AWS error code of err ("" when err is not an API error).
func Code(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// call is one operation: its name and what it is about, for errors.
type call struct{ op, resource string }

func callName(service, op, resource string) string {
	if resource != "" {
		return service + " " + op + " " + resource
	}
	return service + " " + op
}

// Call sends an awsJson1.1 call (POST / with X-Amz-Target: <prefix>.<op>) with in
// as its JSON body and decodes the answer into out (nil: the answer is
// discarded). resource, when not empty, names what the call is about in errors.
func (c *Client) Call(ctx context.Context, op, resource string, in, out any) error {
	k := call{op, resource}
	if c.svc.TargetPrefix == "" {
		return c.named(k, fmt.Errorf("%s is not an awsJson1.1 service", c.svc.ID))
	}
	body, err := json.Marshal(in)
	if err != nil {
		return c.named(k, fmt.Errorf("encode request: %w", err))
	}
	h := http.Header{}
	h.Set("Content-Type", "application/x-amz-json-1.1")
	h.Set("X-Amz-Target", c.svc.TargetPrefix+"."+op)
	return c.do(ctx, k, http.MethodPost, "/", h, body, out)
}

// Get sends a restJson1 GET of path (already escaped, e.g. "/clusters/prod")
// and decodes the answer into out; resource as for Call.
func (c *Client) Get(ctx context.Context, op, resource, path string, out any) error {
	return c.do(ctx, call{op, resource}, http.MethodGet, path, http.Header{}, nil, out)
}

// Endpoint is the URL the client sends to: cfg.BaseEndpoint, or the service's
// regional endpoint.
func (c *Client) Endpoint() (string, error) {
	if c.cfg.BaseEndpoint != nil && *c.cfg.BaseEndpoint != "" {
		return strings.TrimRight(*c.cfg.BaseEndpoint, "/"), nil
	}
	r := c.cfg.Region
	if r == "" {
		return "", errors.New("no region configured")
	}
	// FIPS and dual-stack endpoints are not offered: set BaseEndpoint for them.
	return "https://" + c.svc.EndpointPrefix + "." + r + "." + DNSSuffix(r), nil
}

// DNSSuffix is the DNS suffix of region's partition (endpoints.json): the
// regional endpoints are <service>.<region>.<suffix>.
func DNSSuffix(region string) string {
	switch {
	case strings.HasPrefix(region, "cn-"):
		return "amazonaws.com.cn"
	case strings.HasPrefix(region, "us-isob-"):
		return "sc2s.sgov.gov"
	case strings.HasPrefix(region, "us-iso-"):
		return "c2s.ic.gov"
	}
	return "amazonaws.com"
}

func (c *Client) do(ctx context.Context, op call, method, path string, h http.Header, body []byte, out any) error {
	base, err := c.Endpoint()
	if err != nil {
		return c.named(op, err)
	}
	if c.cfg.Credentials == nil {
		return c.named(op, errors.New("no AWS credentials configured"))
	}
	invocation := invocationID()
	max := c.retryer.MaxAttempts()
	release := func(error) error { return nil }
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return c.named(op, err)
		}
		releaseAttempt, err := c.retryer.GetAttemptToken(ctx)
		if err != nil {
			return c.named(op, fmt.Errorf("retry attempt token: %w", err))
		}
		h.Set("amz-sdk-invocation-id", invocation)
		h.Set("amz-sdk-request", fmt.Sprintf("attempt=%d; max=%d", attempt, max))
		err = c.once(ctx, op, method, base+path, h, body, out)
		_ = release(err)
		_ = releaseAttempt(err)
		if err == nil {
			return nil
		}
		if !c.retryer.IsErrorRetryable(err) {
			return c.named(op, err)
		}
		if max > 0 && attempt >= max {
			return c.named(op, fmt.Errorf("%w (gave up after %d attempts)", err, attempt))
		}
		rel, qerr := c.retryToken(ctx, err)
		if qerr != nil {
			return c.named(op, qerr)
		}
		release = rel
		delay, derr := c.retryer.RetryDelay(attempt, err)
		if derr != nil {
			return c.named(op, fmt.Errorf("%w (not retried: %v)", err, derr))
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return c.named(op, fmt.Errorf("%w (while backing off after: %v)", ctx.Err(), err))
		case <-t.C:
		}
	}
}

// retryToken takes from the retry quota; an empty quota stops retrying with the
// last error.
func (c *Client) retryToken(ctx context.Context, last error) (func(error) error, error) {
	release, err := c.retryer.GetRetryToken(ctx, last)
	if err != nil {
		return nil, fmt.Errorf("%w (not retried: %v)", last, err)
	}
	return release, nil
}

// named prefixes an error that does not already name the call (an *Error does).
func (c *Client) named(op call, err error) error {
	var api *Error
	if errors.As(err, &api) {
		return err
	}
	return fmt.Errorf("%s: %w", callName(c.svc.ID, op.op, op.resource), err)
}

// once sends one attempt.
func (c *Client) once(ctx context.Context, op call, method, url string, h http.Header, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", "joiner")
	req.ContentLength = int64(len(body))
	creds, err := c.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("retrieve credentials: %w", err)
	}
	sum := sha256.Sum256(body)
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	if err := c.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), c.svc.SigningName, c.cfg.Region, now().UTC()); err != nil {
		return fmt.Errorf("sign request: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// As the SDK's transport does: a failed send is a connection error, retried.
		return &smithyhttp.RequestSendError{Err: err}
	}
	defer resp.Body.Close()
	limit := c.MaxResponseBytes
	if limit <= 0 {
		limit = DefaultMaxResponseBytes
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if int64(len(raw)) > limit {
		return fmt.Errorf("answer larger than %d bytes refused (HTTP %d)", limit, resp.StatusCode)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return c.apiError(op, resp, raw)
	}
	if out == nil {
		return nil
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return errors.New("empty answer (want a JSON object)")
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("malformed answer (HTTP %d, %d bytes): %w", resp.StatusCode, len(raw), err)
	}
	return nil
}

// apiError reads an error answer: the code from the X-Amzn-ErrorType header or
// the body's __type/code (namespace and ":"-suffix stripped, as the SDK's
// awsJson deserialisers do), the message from message/Message.
func (c *Client) apiError(op call, resp *http.Response, raw []byte) error {
	e := &Error{Service: c.svc.ID, Operation: op.op, Resource: op.resource, StatusCode: resp.StatusCode,
		RequestID: resp.Header.Get("X-Amzn-Requestid")}
	var doc struct {
		Type     string `json:"__type"`
		Code     string `json:"code"`
		Message  string `json:"message"`
		MessageU string `json:"Message"`
	}
	jsonErr := json.Unmarshal(raw, &doc)
	e.Code = cleanCode(resp.Header.Get("X-Amzn-Errortype"))
	if e.Code == "" {
		e.Code = cleanCode(doc.Type)
	}
	if e.Code == "" {
		e.Code = cleanCode(doc.Code)
	}
	e.Message = doc.Message
	if e.Message == "" {
		e.Message = doc.MessageU
	}
	if jsonErr != nil && len(bytes.TrimSpace(raw)) > 0 {
		// A proxy's or load balancer's page, not the service's answer.
		e.Message = "answer is not JSON: " + snippet(raw)
	}
	if e.Code == "" {
		e.Code = strings.ReplaceAll(http.StatusText(resp.StatusCode), " ", "")
		if e.Code == "" {
			e.Code = fmt.Sprintf("HTTP%d", resp.StatusCode)
		}
	}
	return e
}

func cleanCode(s string) string {
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '#'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}

func snippet(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return fmt.Sprintf("%q", s)
}

func invocationID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
