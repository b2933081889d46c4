package handlers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/lambdacontext"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"

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
	cfg, err := ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	acc, err := access.FromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	log := NewLogger(os.Stdout, os.Getenv(EnvLogLevel))
	slog.SetDefault(log)
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(cfg.Region), awsconfig.WithLogger(SDKLogger(log)))
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
	newDeps := func(ctx context.Context) (*Deps, error) {
		identity := name
		if lc, ok := lambdacontext.FromContext(ctx); ok {
			identity = name + "/" + lc.AwsRequestID
		}
		prov, err := cloud.New(cloud.Config{ClusterName: cfg.ClusterName, Region: cfg.Region, DryRun: cfg.DryRun, Logger: log}, clients)
		if err != nil {
			return nil, err
		}
		cluster := kube.New(kc, kube.Options{ClusterName: cfg.ClusterName, Identity: identity, Log: log})
		return &Deps{Config: cfg, Cluster: cluster, Cloud: prov, Log: log, Identity: identity}, nil
	}
	return NewFunction(name, newDeps)
}

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
