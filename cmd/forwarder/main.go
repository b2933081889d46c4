// Command forwarder is Joiner's only in-cluster component: it watches unbound pods,
// batches the ones kube-scheduler marked Unschedulable, and posts them as "Pending
// Pods" events to Joiner's EventBridge bus, where they trigger the provisioner.
//
// Configuration comes from flags, each defaulting to an environment variable:
//
//	JOINER_CLUSTER_NAME   cluster name written into every event (required)
//	JOINER_EVENT_BUS      EventBridge bus name or ARN (required)
//	FORWARDER_IDLE        flush a batch after this long without a new pod (1s)
//	FORWARDER_MAX_WAIT    flush a batch at the latest this long after its first pod (10s)
//	FORWARDER_HEALTH_ADDR listen address of /healthz (:8081)
//	FORWARDER_RESYNC      re-announce still-pending pods this often, 0 = never (5m)
//	LOG_LEVEL             debug, info, warn or error (info)
//	KUBECONFIG            used only outside a cluster
//
// AWS credentials and region come from the SDK's default chain (IRSA web identity,
// EKS Pod Identity, environment); AWS_ENDPOINT_URL_EVENTBRIDGE points it elsewhere.
// With IRSA the SDK's web-identity provider calls STS (AssumeRoleWithWebIdentity)
// with a client of its own: behind a VPC endpoint or an emulator, set
// AWS_ENDPOINT_URL_STS too (or AWS_ENDPOINT_URL for every service).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
)

// Config is the forwarder's validated configuration.
type Config struct {
	Cluster    string
	Bus        string
	Idle       time.Duration
	MaxWait    time.Duration
	HealthAddr string
	Resync     time.Duration
	LogLevel   slog.Level
	Kubeconfig string
	// Attempts per PutEvents call before a batch is given up (logged).
	Attempts int
	// ShutdownFlush bounds the final flush after SIGTERM; it must stay below the
	// pod's terminationGracePeriodSeconds.
	ShutdownFlush time.Duration
}

// parseConfig reads flags over environment defaults and names every problem at once.
func parseConfig(args []string, getenv func(string) string) (Config, error) {
	env := func(k, def string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return def
	}
	var errs []error
	dur := func(k, def string) time.Duration {
		d, err := time.ParseDuration(env(k, def))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", k, err))
		}
		return d
	}
	c := Config{Attempts: 8, ShutdownFlush: 20 * time.Second}
	fs := flag.NewFlagSet("forwarder", flag.ContinueOnError)
	fs.StringVar(&c.Cluster, "cluster", env("JOINER_CLUSTER_NAME", ""), "cluster name (JOINER_CLUSTER_NAME)")
	fs.StringVar(&c.Bus, "event-bus", env("JOINER_EVENT_BUS", ""), "EventBridge bus name or ARN (JOINER_EVENT_BUS)")
	fs.DurationVar(&c.Idle, "idle", dur("FORWARDER_IDLE", "1s"), "flush after this long without a new pending pod (FORWARDER_IDLE)")
	fs.DurationVar(&c.MaxWait, "max-wait", dur("FORWARDER_MAX_WAIT", "10s"), "flush at the latest this long after a batch's first pod (FORWARDER_MAX_WAIT)")
	fs.StringVar(&c.HealthAddr, "health-addr", env("FORWARDER_HEALTH_ADDR", ":8081"), "listen address of /healthz (FORWARDER_HEALTH_ADDR)")
	fs.DurationVar(&c.Resync, "resync", dur("FORWARDER_RESYNC", "5m"), "re-announce still-pending pods this often, 0 = never (FORWARDER_RESYNC)")
	level := fs.String("log-level", env("LOG_LEVEL", "info"), "debug, info, warn or error (LOG_LEVEL)")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", getenv("KUBECONFIG"), "kubeconfig, used only outside a cluster (KUBECONFIG)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.Cluster == "" {
		errs = append(errs, errors.New("cluster name is missing: set JOINER_CLUSTER_NAME or -cluster"))
	}
	if c.Bus == "" {
		errs = append(errs, errors.New("event bus is missing: set JOINER_EVENT_BUS or -event-bus"))
	}
	if c.Idle <= 0 {
		errs = append(errs, fmt.Errorf("idle %s must be positive", c.Idle))
	}
	if c.MaxWait < c.Idle {
		errs = append(errs, fmt.Errorf("max-wait %s must be at least idle %s", c.MaxWait, c.Idle))
	}
	if c.Resync < 0 {
		errs = append(errs, fmt.Errorf("resync %s must not be negative", c.Resync))
	}
	if err := c.LogLevel.UnmarshalText([]byte(*level)); err != nil {
		errs = append(errs, fmt.Errorf("log level %q: want debug, info, warn or error", *level))
	}
	return c, errors.Join(errs...)
}

func main() {
	cfg, err := parseConfig(os.Args[1:], os.Getenv)
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		log.Error("invalid configuration", "err", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	restCfg, err := kubeConfig(cfg.Kubeconfig)
	if err != nil {
		log.Error("no Kubernetes configuration", "err", err)
		os.Exit(1)
	}
	eb, err := newEventBridge(ctx)
	if err != nil {
		log.Error("loading AWS configuration", "err", err)
		os.Exit(1)
	}
	if err := run(ctx, cfg, restCfg, eb, log); err != nil {
		log.Error("forwarder stopped", "err", err)
		os.Exit(1)
	}
}

// newEventBridge uses the SDK's default chain: region and credentials from the
// environment, IRSA's web identity token file or EKS Pod Identity's container
// credentials; AWS_ENDPOINT_URL_EVENTBRIDGE overrides the endpoint (tests, VPC endpoints),
// AWS_ENDPOINT_URL_STS the one the web-identity provider signs in at.
func newEventBridge(ctx context.Context) (*eventbridge.Client, error) {
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, err
	}
	if awsCfg.Region == "" {
		return nil, errors.New("no AWS region: set AWS_REGION")
	}
	return eventbridge.NewFromConfig(awsCfg), nil
}

func kubeConfig(kubeconfig string) (*rest.Config, error) {
	c, err := rest.InClusterConfig()
	if err == nil {
		return c, nil
	}
	if kubeconfig == "" {
		return nil, fmt.Errorf("not in a cluster (%v) and KUBECONFIG is not set", err)
	}
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}

// run serves until ctx is done, then flushes the last batch and returns.
func run(ctx context.Context, cfg Config, restCfg *rest.Config, api PutEventsAPI, log *slog.Logger) error {
	restCfg = rest.CopyConfig(restCfg)
	restCfg.UserAgent = "joiner-forwarder"
	core, err := coreV1Client(restCfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	pub := &Publisher{API: api, Bus: cfg.Bus, Cluster: cfg.Cluster, Attempts: cfg.Attempts,
		BaseDelay: 200 * time.Millisecond, MaxDelay: 10 * time.Second, Log: log}
	b := NewBatcher(clock.RealClock{}, cfg.Idle, cfg.MaxWait, pub.Flush)
	inf, err := newPodInformer(core, cfg.Resync, b, log)
	if err != nil {
		return fmt.Errorf("pod informer: %w", err)
	}
	h := &health{synced: inf.HasSynced, publisher: pub, batcher: b}
	ln, err := net.Listen("tcp", cfg.HealthAddr)
	if err != nil {
		return fmt.Errorf("health endpoint: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/healthz", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("health endpoint stopped", "err", err)
		}
	}()
	log.Info("forwarder starting", "cluster", cfg.Cluster, "bus", cfg.Bus, "idle", cfg.Idle.String(),
		"maxWait", cfg.MaxWait.String(), "health", ln.Addr().String())

	informerCtx, stopInformer := context.WithCancel(ctx)
	defer stopInformer()
	informerDone := make(chan struct{})
	go func() { defer close(informerDone); inf.RunWithContext(informerCtx) }()
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			h.syncedOnce.Store(true)
			log.Info("pod informer synced")
		}
	}()

	b.Run(ctx, cfg.ShutdownFlush) // returns after the final flush
	stopInformer()
	<-informerDone
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	log.Info("forwarder stopped")
	return nil
}

// health answers /healthz: 200 once the informer has synced, 503 before. A failing
// PutEvents is reported but does not fail the probe: restarting would not mend an
// AWS outage, and the provisioner's sweep covers it meanwhile.
type health struct {
	synced     func() bool
	syncedOnce atomic.Bool
	publisher  *Publisher
	batcher    *Batcher
}

type healthReport struct {
	Synced            bool       `json:"informerSynced"`
	LastSuccessfulPut *time.Time `json:"lastSuccessfulPut,omitempty"`
	LastError         string     `json:"lastError,omitempty"`
	Queued            int        `json:"queuedPods"`
}

func (h *health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rep := healthReport{Synced: h.syncedOnce.Load() || h.synced(), Queued: h.batcher.Len()}
	last, lastErr := h.publisher.Status()
	if !last.IsZero() {
		rep.LastSuccessfulPut = &last
	}
	rep.LastError = strings.TrimSpace(lastErr)
	w.Header().Set("Content-Type", "application/json")
	if !rep.Synced {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(rep)
}
