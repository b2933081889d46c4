// Package awssim is Joiner's wire-level AWS simulator: an http.Handler, served on
// loopback, that the real aws-sdk-go-v2 EC2, SSM, EKS and Secrets Manager clients
// talk to. It speaks the EC2 Query protocol (form-encoded Action=..., XML answers
// in the 2016-11-15 namespace), awsJson1_1 (SSM, Secrets Manager) and EKS's
// restJson1, and routes each request by the service in its SigV4 credential
// scope, so one endpoint serves them all.
//
// Unlike moto_server (the reference emulator the contract tests compare it
// with), it knows real instance prices (shared/catalog), runs on injectable
// simulated time, and takes scripted faults: throttling, 5xx, latency,
// insufficient capacity per offering, partial fleet fulfilment, denied actions
// and spot interruptions. Every call is logged for assertions.
package awssim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
)

// Defaults of Config.
const (
	DefaultRegion    = "us-east-1"
	DefaultAccountID = "123456789012"
	// DefaultShutdownTime is how long a terminated instance stays shutting-down.
	DefaultShutdownTime = 30 * time.Second
	// DefaultSpotNotice is the two-minute warning of a spot interruption.
	DefaultSpotNotice = 2 * time.Minute
	// DefaultTerminatedVisibleFor is how long DescribeInstances still lists a terminated instance.
	DefaultTerminatedVisibleFor = time.Hour
)

// Config configures a simulator. The zero value works: the embedded catalog,
// the default seed, the wall clock.
type Config struct {
	// Catalog supplies instance types, offerings and prices; nil means
	// catalog.Embedded(). Pass an empty catalog for a simulator without types.
	Catalog *catalog.Catalog
	// Seed is the initial state; nil means DefaultSeed(DefaultClusterName).
	Seed *Seed
	// Clock is the source of simulated time; nil means RealClock.
	Clock Clock
	// Addr is the address Start listens on; empty means 127.0.0.1:0. Only
	// loopback addresses are accepted.
	Addr string
	// RandSeed makes generated IDs and fault rates deterministic; 0 means 1.
	RandSeed uint64
	// BootTime is how long a launched instance stays pending (0: it is running
	// from the first look after the launch answer).
	BootTime time.Duration
	// ShutdownTime is how long a terminated instance stays shutting-down;
	// 0 means DefaultShutdownTime, negative means immediately terminated.
	ShutdownTime time.Duration
	// SpotNotice is the time between an interruption warning and the
	// termination of the spot instance; 0 means DefaultSpotNotice.
	SpotNotice time.Duration
	// TerminatedVisibleFor is how long terminated instances stay listed;
	// 0 means DefaultTerminatedVisibleFor.
	TerminatedVisibleFor time.Duration
	// Logger receives one debug record per call; nil discards.
	Logger *slog.Logger
}

// Sim is a running simulator. All methods are safe for concurrent use.
type Sim struct {
	cfg    Config
	clock  Clock
	logger *slog.Logger

	// catalog indexes, read-only after New.
	types     map[string]*catalog.InstanceType
	typeNames []string // sorted
	zones     []string // sorted
	catPrice  map[Offering]catalog.Offering

	mu sync.Mutex
	w  *world

	ln   net.Listener
	srv  *http.Server
	done chan struct{}
}

// New builds a simulator without listening; serve it with any http.Server, or
// use Start.
func New(cfg Config) (*Sim, error) {
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	if cfg.Catalog == nil {
		cfg.Catalog = catalog.Embedded()
	}
	if cfg.RandSeed == 0 {
		cfg.RandSeed = 1
	}
	if cfg.ShutdownTime == 0 {
		cfg.ShutdownTime = DefaultShutdownTime
	} else if cfg.ShutdownTime < 0 {
		cfg.ShutdownTime = 0
	}
	if cfg.SpotNotice <= 0 {
		cfg.SpotNotice = DefaultSpotNotice
	}
	if cfg.TerminatedVisibleFor <= 0 {
		cfg.TerminatedVisibleFor = DefaultTerminatedVisibleFor
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Sim{
		cfg:      cfg,
		clock:    cfg.Clock,
		logger:   cfg.Logger,
		types:    map[string]*catalog.InstanceType{},
		catPrice: map[Offering]catalog.Offering{},
	}
	zones := map[string]bool{}
	if cfg.Catalog != nil {
		for i := range cfg.Catalog.InstanceTypes {
			it := &cfg.Catalog.InstanceTypes[i]
			if it.Name == "" {
				return nil, fmt.Errorf("awssim: catalog instance type #%d has no name", i)
			}
			if _, dup := s.types[it.Name]; dup {
				return nil, fmt.Errorf("awssim: catalog lists instance type %q twice", it.Name)
			}
			s.types[it.Name] = it
			s.typeNames = append(s.typeNames, it.Name)
			for _, o := range it.Offerings {
				zones[o.Zone] = true
				s.catPrice[Offering{it.Name, o.Zone, o.CapacityType}] = o
			}
		}
	}
	sort.Strings(s.typeNames)
	seed := cfg.Seed
	if seed == nil {
		d := DefaultSeed(DefaultClusterName)
		seed = &d
	}
	region := seed.Region
	if region == "" && cfg.Catalog != nil {
		region = cfg.Catalog.Region
	}
	if region == "" {
		region = DefaultRegion
	}
	if len(zones) == 0 {
		for _, z := range []string{"a", "b", "c"} {
			zones[region+z] = true
		}
	}
	for _, sn := range seed.Subnets {
		if sn.Zone != "" {
			zones[sn.Zone] = true
		}
	}
	for z := range zones {
		s.zones = append(s.zones, z)
	}
	sort.Strings(s.zones)

	acct := seed.AccountID
	if acct == "" {
		acct = DefaultAccountID
	}
	s.w = newWorld(region, acct, rand.New(rand.NewPCG(cfg.RandSeed, 0x6a6f696e6572)))
	if err := s.apply(*seed); err != nil {
		return nil, err
	}
	return s, nil
}

// Start builds a simulator and serves it on cfg.Addr (default 127.0.0.1:0)
// until ctx ends or Close is called.
func Start(ctx context.Context, cfg Config) (*Sim, error) {
	addr := cfg.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if err := CheckLoopback(addr); err != nil {
		return nil, err
	}
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("awssim: listen on %s: %w", addr, err)
	}
	s.ln = ln
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("awssim: serve", "err", err)
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-s.done:
		}
	}()
	return s, nil
}

// CheckLoopback returns an error unless addr (host:port) names a loopback address.
func CheckLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("awssim: bad address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("awssim: refusing to listen on %q: only loopback addresses (127.0.0.1, ::1, localhost) are allowed", addr)
	}
	return nil
}

// Endpoint is the base URL clients use (http://127.0.0.1:PORT); empty when the
// simulator was built with New and is not listening.
func (s *Sim) Endpoint() string {
	if s.ln == nil {
		return ""
	}
	return "http://" + s.ln.Addr().String()
}

// Close stops serving. It is safe to call more than once.
func (s *Sim) Close() error {
	if s.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.srv.Close()
	}
	<-s.done
	return err
}

// Region is the simulated region.
func (s *Sim) Region() string { return s.w.region }

// Clock is the simulator's clock.
func (s *Sim) Clock() Clock { return s.clock }

// AWSConfig is NewAWSConfig for this simulator's endpoint and region.
func (s *Sim) AWSConfig() aws.Config {
	cfg := NewAWSConfig(s.Endpoint())
	cfg.Region = s.w.region
	return cfg
}

// NewAWSConfig returns an aws.Config that points every client built from it
// (ec2.NewFromConfig, ssm.NewFromConfig, eks.NewFromConfig, ...) at endpoint,
// with static credentials and region us-east-1. The retryer is the SDK default.
func NewAWSConfig(endpoint string) aws.Config {
	return aws.Config{
		Region:       DefaultRegion,
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDJOINERSIM", "joiner-sim-secret", ""),
		BaseEndpoint: aws.String(endpoint),
	}
}

// MaxBodyBytes is the largest request body the simulator reads; a larger one is
// answered 413 RequestEntityTooLarge, never cut short. Joiner's largest legitimate
// request (a CreateLaunchTemplate with 16 KB of user data) is far below it.
const MaxBodyBytes = 8 << 20

// ServeHTTP routes a request to EC2, IAM, SSM, EKS, Secrets Manager or the /_sim/ control endpoints.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/_sim/") {
		s.serveControl(w, r)
		return
	}
	svc := serviceOf(r)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		// Truncating would hand the service half a request (SSM then fails with
		// "unexpected EOF" far from the cause); AWS refuses the request instead.
		msg := fmt.Sprintf("request body is larger than the simulator's limit of %d bytes", MaxBodyBytes)
		switch svc {
		case "ec2":
			s.writeEC2Error(w, "", errf(http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "%s", msg))
		case "iam":
			writeIAMError(w, "", errf(http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "%s", msg))
		default:
			writeJSONError(w, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", msg, "")
		}
		return
	case err != nil:
		http.Error(w, "awssim: read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	switch svc {
	case "ec2":
		s.serveEC2(w, r, body)
	case "ssm":
		s.serveSSM(w, r, body)
	case "eks":
		s.serveEKS(w, r, body)
	case "secretsmanager":
		s.serveSecretsManager(w, r, body)
	case "iam":
		s.serveIAM(w, r, body)
	default:
		writeJSONError(w, http.StatusBadRequest, "UnknownService",
			fmt.Sprintf("awssim serves ec2, iam, ssm, eks and secretsmanager; cannot tell the service of %s %s (credential scope %q)", r.Method, r.URL.Path, svc), "")
	}
}

// serviceOf reads the service from the SigV4 credential scope
// (Credential=AKID/20240501/us-east-1/ec2/aws4_request), falling back to the
// shape of the request when it is unsigned.
func serviceOf(r *http.Request) string {
	auth := r.Header.Get("Authorization")
	if i := strings.Index(auth, "Credential="); i >= 0 {
		scope := auth[i+len("Credential="):]
		if j := strings.IndexAny(scope, ", "); j >= 0 {
			scope = scope[:j]
		}
		if parts := strings.Split(scope, "/"); len(parts) == 5 {
			return parts[3]
		}
	}
	switch {
	case strings.HasPrefix(r.Header.Get("X-Amz-Target"), "AmazonSSM."):
		return "ssm"
	case strings.HasPrefix(r.Header.Get("X-Amz-Target"), "secretsmanager."):
		return "secretsmanager"
	case strings.HasPrefix(r.URL.Path, "/clusters"):
		return "eks"
	case r.Method == http.MethodPost && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded"):
		return "ec2"
	}
	return ""
}

// apiError is an error answer of a simulated service.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func errBadParam(format string, a ...any) *apiError {
	return &apiError{http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf(format, a...)}
}

func errf(status int, code, format string, a ...any) *apiError {
	return &apiError{status, code, fmt.Sprintf(format, a...)}
}

// admission runs the fault script and the policy for one call, under s.mu. It
// returns a latency to apply (outside the lock) and an error answer, if any.
type admission struct {
	sleep    time.Duration
	simSleep time.Duration
	err      *apiError
	partial  int // launch cap from a partial-fleet fault; -1 none
}

// admit decides, before the handler runs, whether faults or the policy answer
// the call. The caller holds s.mu.
func (s *Sim) admit(service, action string) admission {
	a := admission{partial: -1}
	w := s.w
	for _, f := range w.faults {
		if f.Count > 0 && f.Hits >= f.Count {
			continue
		}
		if !f.matches(service, action) {
			continue
		}
		if f.Kind == FaultPartialFleet && action != "CreateFleet" && action != "RunInstances" {
			continue
		}
		if f.Rate > 0 && f.Rate < 1 && w.faultRNG.Float64() >= f.Rate {
			continue
		}
		switch f.Kind {
		case FaultLatency:
			f.Hits++
			if _, ok := s.clock.(Advancer); ok && f.SimulatedOnly {
				a.simSleep += time.Duration(f.Latency)
			} else {
				a.sleep += time.Duration(f.Latency)
			}
		case FaultThrottle:
			if a.err == nil {
				f.Hits++
				a.err = throttleError(service)
			}
		case FaultInternal:
			if a.err == nil {
				f.Hits++
				a.err = internalError(service)
			}
		case FaultPartialFleet:
			if a.partial < 0 {
				f.Hits++
				a.partial = f.Launch
			}
		}
	}
	w.dropSpentFaults()
	if a.err == nil && w.denied(service, action) {
		a.err = s.unauthorized(service, action)
	}
	return a
}

func throttleError(service string) *apiError {
	switch service {
	case "ec2":
		return errf(http.StatusServiceUnavailable, "RequestLimitExceeded", "Request limit exceeded.")
	case "eks":
		return errf(http.StatusTooManyRequests, "ThrottlingException", "Rate exceeded")
	case "iam":
		return errf(http.StatusBadRequest, "Throttling", "Rate exceeded")
	default:
		return errf(http.StatusBadRequest, "ThrottlingException", "Rate exceeded")
	}
}

func internalError(service string) *apiError {
	switch service {
	case "ec2":
		return errf(http.StatusInternalServerError, "InternalError", "An internal error has occurred")
	case "eks":
		return errf(http.StatusInternalServerError, "ServerException", "An internal error has occurred")
	case "iam":
		return errf(http.StatusInternalServerError, "ServiceFailure", "The request processing has failed because of an unknown error, exception or failure.")
	default:
		return errf(http.StatusInternalServerError, "InternalServerError", "An internal error has occurred")
	}
}

func (s *Sim) unauthorized(service, action string) *apiError {
	who := fmt.Sprintf("arn:aws:sts::%s:assumed-role/joiner/awssim", s.w.account)
	if service == "ec2" {
		return errf(http.StatusForbidden, "UnauthorizedOperation",
			"You are not authorized to perform this operation. User: %s is not authorized to perform: ec2:%s because no identity-based policy allows the ec2:%s action", who, action, action)
	}
	if service == "iam" {
		return errf(http.StatusForbidden, "AccessDenied", "User: %s is not authorized to perform: iam:%s because no identity-based policy allows the iam:%s action", who, action, action)
	}
	status := http.StatusBadRequest
	if service == "eks" {
		status = http.StatusForbidden
	}
	return errf(status, "AccessDeniedException", "User: %s is not authorized to perform: %s:%s", who, service, action)
}

// record appends a call to the log with its answer (aerr, or OK). The caller
// holds s.mu.
func (s *Sim) record(c Call, aerr *apiError) {
	if aerr != nil {
		c.Code, c.Status = aerr.Code, aerr.Status
	} else {
		c.Code, c.Status = CodeOK, http.StatusOK
	}
	w := s.w
	c.Seq = len(w.calls) + 1
	c.Time = s.clock.Now()
	w.calls = append(w.calls, c)
	s.logger.Debug("awssim call", "service", c.Service, "action", c.Action, "code", c.Code, "status", c.Status, "attempt", c.Attempt)
}

// attemptOf reads the SDK's attempt number ("attempt=2; max=3").
func attemptOf(r *http.Request) int {
	h := r.Header.Get("amz-sdk-request")
	for _, part := range strings.Split(h, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if ok && k == "attempt" {
			var n int
			fmt.Sscanf(v, "%d", &n)
			return n
		}
	}
	return 0
}

// sleepFor applies a latency fault outside the lock.
func (s *Sim) sleepFor(ctx context.Context, a admission) {
	if a.simSleep > 0 {
		if adv, ok := s.clock.(Advancer); ok {
			adv.Advance(a.simSleep)
		}
	}
	if a.sleep > 0 {
		t := time.NewTimer(a.sleep)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

func writeJSONError(w http.ResponseWriter, status int, code, msg, requestID string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-ErrorType", code)
	if requestID != "" {
		w.Header().Set("X-Amzn-RequestId", requestID)
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": msg})
}

func writeJSON(w http.ResponseWriter, status int, contentType, requestID string, v any) {
	w.Header().Set("Content-Type", contentType)
	if requestID != "" {
		w.Header().Set("X-Amzn-RequestId", requestID)
	}
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
