// Package handlers holds the three Lambda functions' handlers — provisioner,
// interruption and consolidator — as one code path for production, replay, local
// invocation and tests: each turns an event into a snapshot read, a decision by the
// shared engine, and actions on EC2 and Kubernetes through small interfaces.
package handlers

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/joiner-autoscaler/joiner/shared/kube/access"
)

// Rebalance modes: what a rebalance recommendation does.
const (
	RebalanceIgnore  = "ignore"
	RebalanceTaint   = "taint"
	RebalanceReplace = "replace"
)

// Config is what every function reads from its environment.
type Config struct {
	// ClusterName is the cluster Joiner scales (required).
	ClusterName string
	// Region is the AWS region (required).
	Region string
	// AccountID, when set, makes events from other accounts ignored.
	AccountID string
	// DryRun sends every EC2 mutation with DryRun=true and writes nothing to Kubernetes.
	DryRun bool
	// Mode is ModeAct (the default) or ModeShadow.
	Mode string
	// Rebalance is ignore, taint or replace (default ignore).
	Rebalance string
	// LeaseDuration bounds how long a crashed holder blocks others (default 60s); it
	// must stay below the function timeout.
	LeaseDuration time.Duration
	// LeaseWait is how long the interruption path waits for the lease before acting
	// anyway (default 3s).
	LeaseWait time.Duration
	// MinSavingsFraction is the smallest relative saving a consolidation replace must
	// bring (default 0.1).
	MinSavingsFraction float64
	// ClusterCIDR is the cluster's service CIDR for user data (AL2023's nodeadm needs
	// it). Required knowledge for a self-managed cluster, which has no EKS
	// DescribeCluster to read it from; on EKS it overrides DescribeCluster's.
	ClusterCIDR string
}

// Environment variables the functions read (the CDK stack sets them; cluster access
// has its own, in shared/kube/access).
const (
	EnvClusterName     = access.EnvClusterName
	EnvRegion          = access.EnvRegion
	EnvAccountID       = "JOINER_ACCOUNT_ID"
	EnvDryRun          = "JOINER_DRY_RUN"
	EnvMode            = "JOINER_MODE"
	EnvRebalanceMode   = "JOINER_REBALANCE_MODE"
	EnvLeaseSeconds    = "JOINER_LEASE_SECONDS"
	EnvLeaseWait       = "JOINER_LEASE_WAIT_SECONDS"
	EnvMinSavings      = "JOINER_MIN_SAVINGS_FRACTION"
	EnvClusterCIDR     = "JOINER_CLUSTER_CIDR"
	EnvLogLevel        = "AWS_LAMBDA_LOG_LEVEL"
	EnvAWSEndpointURL  = "AWS_ENDPOINT_URL"
	EnvDryRunShorthand = "DRY_RUN"
)

// ConfigFromEnv reads and validates the configuration; the error names every
// variable that is missing or wrong.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		ClusterName: getenv(EnvClusterName), Region: getenv(EnvRegion), AccountID: getenv(EnvAccountID),
		Rebalance: strings.ToLower(getenv(EnvRebalanceMode)), LeaseDuration: 60 * time.Second,
		LeaseWait: 3 * time.Second, MinSavingsFraction: 0.1,
	}
	var problems []string
	if c.ClusterName == "" {
		problems = append(problems, EnvClusterName+" is not set")
	}
	if c.Region == "" {
		problems = append(problems, EnvRegion+" is not set")
	}
	dry := getenv(EnvDryRun)
	if dry == "" {
		dry = getenv(EnvDryRunShorthand) // DRY_RUN=1 on the command line
	}
	switch v := strings.ToLower(dry); v {
	case "", "0", "false", "no":
	case "1", "true", "yes":
		c.DryRun = true
	default:
		problems = append(problems, fmt.Sprintf("%s=%q: want 1/true or 0/false", EnvDryRun, v))
	}
	switch c.Mode = strings.ToLower(getenv(EnvMode)); c.Mode {
	case "":
		c.Mode = ModeAct
	case ModeAct, ModeShadow:
	default:
		problems = append(problems, fmt.Sprintf("%s=%q: want act or shadow", EnvMode, c.Mode))
	}
	if c.Mode == ModeShadow && c.DryRun {
		problems = append(problems, fmt.Sprintf("%s=shadow and %s: pick one (shadow already writes nothing; dry run asks EC2 whether each write would succeed)", EnvMode, EnvDryRun))
	}
	switch c.Rebalance {
	case "":
		c.Rebalance = RebalanceIgnore
	case RebalanceIgnore, RebalanceTaint, RebalanceReplace:
	default:
		problems = append(problems, fmt.Sprintf("%s=%q: want ignore, taint or replace", EnvRebalanceMode, c.Rebalance))
	}
	seconds := func(name string, dst *time.Duration, min, max int) {
		v := getenv(name)
		if v == "" {
			return
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < min || n > max {
			problems = append(problems, fmt.Sprintf("%s=%q: want whole seconds from %d to %d", name, v, min, max))
			return
		}
		*dst = time.Duration(n) * time.Second
	}
	seconds(EnvLeaseSeconds, &c.LeaseDuration, 15, 900)
	seconds(EnvLeaseWait, &c.LeaseWait, 0, 30)
	if v := getenv(EnvMinSavings); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f >= 1 {
			problems = append(problems, fmt.Sprintf("%s=%q: want a number in [0, 1)", EnvMinSavings, v))
		} else {
			c.MinSavingsFraction = f
		}
	}
	if v := strings.TrimSpace(getenv(EnvClusterCIDR)); v != "" {
		if _, n, err := net.ParseCIDR(v); err != nil {
			problems = append(problems, fmt.Sprintf("%s=%q: want the service CIDR, such as 10.96.0.0/12", EnvClusterCIDR, v))
		} else if n.String() != v {
			problems = append(problems, fmt.Sprintf("%s=%q: not a network address (did you mean %s?)", EnvClusterCIDR, v, n))
		} else {
			c.ClusterCIDR = v
		}
	}
	if len(problems) > 0 {
		return c, fmt.Errorf("invalid configuration: %s", strings.Join(problems, "; "))
	}
	return c, nil
}
