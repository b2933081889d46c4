package handlers

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go/logging"

	"github.com/joiner-autoscaler/joiner/shared/awsjson"
	"github.com/joiner-autoscaler/joiner/shared/cloud"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kube/access"
)

// FromEnv builds a function for the Lambda runtime: configuration, cluster access
// and AWS clients come from the environment and are checked once, at start, so a
// misconfigured function fails its first invocation with a message naming what is
// wrong rather than half-way through a decision. Clients are built once per
// container; each invocation gets its own provider (per-invocation discovery cache)
// and Kubernetes client (its identity carries the request id).
func FromEnv(ctx context.Context, name string) (*Function, error) {
	return FromEnvWith(ctx, name, Env{Getenv: os.Getenv, Log: os.Stdout})
}

// FromEnvFor is FromEnv for one handler: a Lambda main calls it so that its binary
// links that handler only.
func FromEnvFor(ctx context.Context, h Handler) (*Function, error) {
	limitMemory(os.Getenv)
	return fromEnv(ctx, h, Env{Getenv: os.Getenv, Log: os.Stdout})
}

// Env is where FromEnvWith reads its settings and writes its logs. The Lambda
// runtime uses the process environment and stdout; `joiner invoke --live` overlays
// its flags on the environment and keeps stdout for the decision summary.
type Env struct {
	// Getenv reads a setting (os.Getenv when nil).
	Getenv func(string) string
	// Log receives the JSON logs and the metrics line (os.Stdout when nil).
	Log io.Writer
	// AWSConfig loads the AWS configuration for region. When nil, LambdaAWSConfig
	// reads it from Getenv, as the Lambda runtime provides it. A command run by a
	// person passes the SDK's default chain (config.LoadDefaultConfig: profiles,
	// SSO); the functions do not link that chain (see LambdaAWSConfig).
	AWSConfig func(ctx context.Context, region string, logger logging.Logger) (aws.Config, error)
}

// FromEnvWith is FromEnv over env.
func FromEnvWith(ctx context.Context, name string, env Env) (*Function, error) {
	h, err := HandlerNamed(name)
	if err != nil {
		return nil, err
	}
	return fromEnv(ctx, h, env)
}

func fromEnv(ctx context.Context, h Handler, env Env) (*Function, error) {
	name := h.name
	getenv, out := env.Getenv, env.Log
	if getenv == nil {
		getenv = os.Getenv
	}
	if out == nil {
		out = os.Stdout
	}
	cfg, err := ConfigFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	acc, err := access.FromEnv(getenv)
	if err != nil {
		return nil, err
	}
	log := NewLogger(out, getenv(EnvLogLevel))
	slog.SetDefault(log)
	loadAWS := env.AWSConfig
	if loadAWS == nil {
		loadAWS = func(_ context.Context, region string, logger logging.Logger) (aws.Config, error) {
			return LambdaAWSConfig(getenv, region, logger)
		}
	}
	awsCfg, err := loadAWS(ctx, cfg.Region, SDKLogger(log))
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	clients := cloud.NewClients(awsCfg, cloud.RetryOptions{}, awsCfg.BaseEndpoint == nil)
	rest, err := access.RESTConfig(ctx, acc, access.Deps{AWS: awsCfg})
	if err != nil {
		return nil, fmt.Errorf("cluster access: %w", err)
	}
	kc, err := kube.NewClients(rest)
	if err != nil {
		return nil, fmt.Errorf("cluster access: %w", err)
	}
	// A warm container reads instance types, offerings and spot prices on a timer,
	// not on every invocation, and trusts an instance profile it saw ready for a while.
	catalogCache := cloud.NewCatalogCache(TypesTTL, PricesTTL)
	profiles := cloud.NewInstanceProfileCache(nil)
	cloudCfg := cloud.Config{ClusterName: cfg.ClusterName, Region: cfg.Region, DryRun: cfg.DryRun, Logger: log,
		CatalogCache: catalogCache, InstanceProfiles: profiles, ClusterCIDR: cfg.ClusterCIDR}
	if acc.Mode == access.ModeSelfManaged {
		// No EKS cluster to describe: the endpoint and CA are the cluster secret's
		// (what the functions reach the API server with), the version the API
		// server's own (read per invocation, so an upgrade is seen at once).
		cloudCfg.SelfManaged = true
		cloudCfg.ClusterEndpoint = rest.Host
		cloudCfg.ClusterCABundle = base64.StdEncoding.EncodeToString(rest.CAData)
	}
	var memory MemoryStore
	if cfg.Mode == ModeShadow {
		ssmCfg := awsCfg.Copy()
		ssmCfg.Retryer = cloud.RetryOptions{}.Retryer()
		memory = NewSSMMemory(awsjson.NewSSM(ssmCfg), cfg.ClusterName)
	}
	newDeps := func(ctx context.Context) (*Deps, error) {
		identity := name
		if lc, ok := lambdacontext.FromContext(ctx); ok {
			identity = name + "/" + lc.AwsRequestID
		}
		pc := cloudCfg
		if pc.SelfManaged {
			v, err := kube.ServerVersion(ctx, rest)
			if err != nil {
				return nil, fmt.Errorf("self-managed cluster %s: %w", cfg.ClusterName, err)
			}
			pc.KubernetesVersion = v
		}
		prov, err := cloud.New(pc, clients)
		if err != nil {
			return nil, err
		}
		cluster := kube.New(kc, kube.Options{ClusterName: cfg.ClusterName, Identity: identity, Log: log})
		return &Deps{Config: cfg, Cluster: cluster, Cloud: prov, Log: log, Identity: identity, ShadowMemory: memory}, nil
	}
	fn := NewFunctionFor(h, newDeps)
	fn.MetricsOut = out
	return fn, nil
}

// How long a warm container reuses what it read from EC2: instance types and their
// offerings (which change when AWS adds a type or a zone), and spot prices.
const (
	TypesTTL  = time.Hour
	PricesTTL = 5 * time.Minute
)

// NewLogger returns Joiner's JSON logger. Its records carry a "level" field in the
// form Lambda's log-level filtering reads (DEBUG, INFO, WARN, ERROR).
func NewLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	switch strings.ToUpper(level) {
	case "TRACE", "DEBUG":
		l = slog.LevelDebug
	case "WARN":
		l = slog.LevelWarn
	case "ERROR", "FATAL":
		l = slog.LevelError
	default:
		l = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.LevelKey {
			a.Key = "level"
		}
		return a
	}}))
}

// SDKLogger routes the AWS SDK's own warnings (retries, connection reuse) into
// Joiner's JSON log, so every line a function writes carries a level.
func SDKLogger(log *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
		level := slog.LevelDebug
		if c == logging.Warn {
			level = slog.LevelWarn
		}
		log.Log(context.Background(), level, fmt.Sprintf(format, v...), "source", "aws-sdk")
	})
}
