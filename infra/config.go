package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
)

// ClusterKind says how the functions reach the cluster's API server.
type ClusterKind string

// Cluster kinds (the values of shared/kube/access.Mode the stack can deploy for).
const (
	KindEKS         ClusterKind = "eks"
	KindSelfManaged ClusterKind = "self-managed"
)

// ForwarderAuth says how the in-cluster forwarder gets AWS credentials.
type ForwarderAuth string

// Forwarder credential modes.
const (
	AuthIRSA        ForwarderAuth = "irsa"
	AuthPodIdentity ForwarderAuth = "pod-identity"
)

// Rebalance modes: what the interruption function does on a rebalance recommendation.
var rebalanceModes = []string{"ignore", "taint", "replace"}

// Context keys the app reads (`cdk synth -c key=value` or cdk.json "context").
const (
	CtxStackName               = "stackName"
	CtxClusterName             = "clusterName"
	CtxClusterKind             = "clusterKind"
	CtxClusterSecretArn        = "clusterSecretArn"
	CtxServiceCIDR             = "serviceCidr"
	CtxSubnetIDs               = "subnetIds"
	CtxSecurityGroupIDs        = "securityGroupIds"
	CtxNodeRoleArn             = "nodeRoleArn"
	CtxNodeAccessEntry         = "nodeAccessEntry"
	CtxForwarderAuth           = "forwarderAuth"
	CtxOIDCProviderArn         = "oidcProviderArn"
	CtxOIDCIssuer              = "oidcIssuer"
	CtxForwarderNamespace      = "forwarderNamespace"
	CtxForwarderServiceAccount = "forwarderServiceAccount"
	CtxScheduleRate            = "scheduleRate"
	CtxConsolidationRate       = "consolidationRate"
	CtxRebalanceMode           = "rebalanceMode"
	CtxDryRun                  = "dryRun"
	CtxMode                    = "mode"
	CtxRecordQueue             = "recordQueue"
	CtxBootstrapTokenParameter = "bootstrapTokenParameter"
	CtxBootstrapTokenSecretArn = "bootstrapTokenSecretArn"
	CtxLogLevel                = "logLevel"
	CtxLogRetentionDays        = "logRetentionDays"
	CtxAlarmTopicArn           = "alarmTopicArn"
	CtxDistDir                 = "distDir"
)

// Config is the validated deployment configuration.
type Config struct {
	StackName   string
	ClusterName string
	Kind        ClusterKind
	// SecretArn names the Secrets Manager secret holding the self-managed cluster's
	// endpoint, CA and token (the format shared/kube/access reads).
	SecretArn string
	// ServiceCIDR is the cluster's service CIDR for user data (AL2023's nodeadm
	// needs it); a self-managed cluster has no DescribeCluster to read it from.
	ServiceCIDR string

	// SubnetIDs and SecurityGroupIDs put the functions in a VPC (both or neither).
	SubnetIDs        []string
	SecurityGroupIDs []string

	// NodeRoleArn is an existing node role; empty means the stack creates one.
	NodeRoleArn string
	// NodeAccessEntry creates the EC2_LINUX access entry for the node role (EKS only).
	NodeAccessEntry bool

	ForwarderAuth           ForwarderAuth
	OIDCProviderArn         string
	OIDCIssuer              string // host/path, no scheme: the IAM condition-key prefix
	ForwarderNamespace      string
	ForwarderServiceAccount string

	ScheduleRate      string // CloudWatch rate body, "1 minute"
	ConsolidationRate string
	RebalanceMode     string
	DryRun            bool
	// Mode is "act" or "shadow" (decide and record only, beside Karpenter).
	Mode string
	// RecordQueue makes the rules deliver every event to an SQS queue as well, for
	// `joiner record --queue` to turn a production day into a replay scenario.
	RecordQueue bool
	// BootstrapTokenParameter is the SSM parameter holding a kubeadm join token for
	// self-managed clusters; empty for EKS unless set. The node role may read it.
	BootstrapTokenParameter string
	// BootstrapTokenSecretArn is a Secrets Manager secret holding the token
	// instead; the node role may read it (and no parameter).
	BootstrapTokenSecretArn string
	LogLevel                string
	LogRetentionDays        int
	AlarmTopicArn           string
	DistDir                 string
}

// Getter reads one context value (construct.Node().TryGetContext in the app, a map in
// tests); nil means unset.
type Getter func(key string) any

var (
	clusterNamePattern = regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9\-_]*$`)
	k8sNamePattern     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	ratePattern        = regexp.MustCompile(`^([1-9][0-9]*) (minute|minutes|hour|hours|day|days)$`)
	subnetPattern      = regexp.MustCompile(`^subnet-[0-9a-f]{8,17}$`)
	sgPattern          = regexp.MustCompile(`^sg-[0-9a-f]{8,17}$`)
	roleArnPattern     = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:role/(?:[\w+=,.@-]+/)*([\w+=,.@-]{1,64})$`)
	oidcArnPattern     = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:oidc-provider/(.+)$`)
	secretArnPattern   = regexp.MustCompile(`^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[\w/+=.@-]+$`)
	topicArnPattern    = regexp.MustCompile(`^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[\w-]{1,256}$`)
	ssmNamePattern     = regexp.MustCompile(`^/[a-zA-Z0-9_.\-/]+$`)
)

// logRetention maps the day counts CloudWatch Logs accepts to CDK's names for them.
var logRetention = map[int]awslogs.RetentionDays{
	1: awslogs.RetentionDays_ONE_DAY, 3: awslogs.RetentionDays_THREE_DAYS, 5: awslogs.RetentionDays_FIVE_DAYS,
	7: awslogs.RetentionDays_ONE_WEEK, 14: awslogs.RetentionDays_TWO_WEEKS, 30: awslogs.RetentionDays_ONE_MONTH,
	60: awslogs.RetentionDays_TWO_MONTHS, 90: awslogs.RetentionDays_THREE_MONTHS, 120: awslogs.RetentionDays_FOUR_MONTHS,
	150: awslogs.RetentionDays_FIVE_MONTHS, 180: awslogs.RetentionDays_SIX_MONTHS, 365: awslogs.RetentionDays_ONE_YEAR,
	400: awslogs.RetentionDays_THIRTEEN_MONTHS, 545: awslogs.RetentionDays_EIGHTEEN_MONTHS, 731: awslogs.RetentionDays_TWO_YEARS,
	1096: awslogs.RetentionDays_THREE_YEARS, 1827: awslogs.RetentionDays_FIVE_YEARS, 2192: awslogs.RetentionDays_SIX_YEARS,
	2557: awslogs.RetentionDays_SEVEN_YEARS, 2922: awslogs.RetentionDays_EIGHT_YEARS, 3288: awslogs.RetentionDays_NINE_YEARS,
	3653: awslogs.RetentionDays_TEN_YEARS,
}

// ConfigFromContext reads and validates the configuration, reporting every problem at
// once with the context key to fix.
func ConfigFromContext(get Getter) (Config, error) {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("-c %s: "+format, append([]any{key}, args...)...))
	}
	str := func(key, def string) string {
		v := get(key)
		if v == nil {
			return def
		}
		s, ok := v.(string)
		if !ok {
			bad(key, "want a string, got %v (%T)", v, v)
			return def
		}
		s = strings.TrimSpace(s)
		if s == "" {
			return def
		}
		return s
	}
	boolean := func(key string, def bool) bool {
		switch v := get(key).(type) {
		case nil:
			return def
		case bool:
			return v
		case string:
			b, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				bad(key, "%q is not true or false", v)
				return def
			}
			return b
		default:
			bad(key, "want true or false, got %v (%T)", v, v)
			return def
		}
	}
	list := func(key string) []string {
		var items []string
		switch v := get(key).(type) {
		case nil:
		case string:
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					items = append(items, s)
				}
			}
		case []any:
			for _, x := range v {
				s, ok := x.(string)
				if !ok {
					bad(key, "want strings, got %v (%T)", x, x)
					continue
				}
				items = append(items, strings.TrimSpace(s))
			}
		default:
			bad(key, "want a comma-separated list, got %v (%T)", v, v)
		}
		return items
	}

	c := Config{
		ClusterName:             str(CtxClusterName, ""),
		Kind:                    ClusterKind(str(CtxClusterKind, string(KindEKS))),
		SecretArn:               str(CtxClusterSecretArn, ""),
		ServiceCIDR:             strings.TrimSpace(str(CtxServiceCIDR, "")),
		SubnetIDs:               list(CtxSubnetIDs),
		SecurityGroupIDs:        list(CtxSecurityGroupIDs),
		NodeRoleArn:             str(CtxNodeRoleArn, ""),
		OIDCProviderArn:         str(CtxOIDCProviderArn, ""),
		OIDCIssuer:              str(CtxOIDCIssuer, ""),
		ForwarderNamespace:      str(CtxForwarderNamespace, "joiner"),
		ForwarderServiceAccount: str(CtxForwarderServiceAccount, "joiner-forwarder"),
		ScheduleRate:            str(CtxScheduleRate, "1 minute"),
		RebalanceMode:           str(CtxRebalanceMode, "ignore"),
		DryRun:                  boolean(CtxDryRun, false),
		Mode:                    strings.ToLower(str(CtxMode, "act")),
		RecordQueue:             boolean(CtxRecordQueue, false),
		BootstrapTokenParameter: str(CtxBootstrapTokenParameter, ""),
		BootstrapTokenSecretArn: str(CtxBootstrapTokenSecretArn, ""),
		LogLevel:                strings.ToUpper(str(CtxLogLevel, "INFO")),
		AlarmTopicArn:           str(CtxAlarmTopicArn, ""),
		DistDir:                 str(CtxDistDir, "../dist"),
	}
	c.ConsolidationRate = str(CtxConsolidationRate, c.ScheduleRate)
	c.NodeAccessEntry = boolean(CtxNodeAccessEntry, c.NodeRoleArn == "")
	c.ForwarderAuth = ForwarderAuth(str(CtxForwarderAuth, string(AuthIRSA)))
	c.StackName = str(CtxStackName, "Joiner-"+strings.ReplaceAll(c.ClusterName, "_", "-"))
	switch v := get(CtxLogRetentionDays).(type) {
	case nil:
		c.LogRetentionDays = 30
	case float64:
		c.LogRetentionDays = int(v)
	case int:
		c.LogRetentionDays = v
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			bad(CtxLogRetentionDays, "%q is not a number of days", v)
		}
		c.LogRetentionDays = n
	default:
		bad(CtxLogRetentionDays, "want a number of days, got %v (%T)", v, v)
	}
	if get("clusterEndpoint") != nil {
		errs = append(errs, errors.New("-c clusterEndpoint: not used: EKS endpoints come from eks:DescribeCluster and a self-managed cluster's endpoint from the \"endpoint\" field of its secret (-c clusterSecretArn); remove it"))
	}

	// The cluster.
	switch {
	case c.ClusterName == "":
		bad(CtxClusterName, "required: the cluster's name (the EKS cluster name, or the name in the kubernetes.io/cluster/<name> ownership tag)")
	case len(c.ClusterName) > 100 || !clusterNamePattern.MatchString(c.ClusterName):
		bad(CtxClusterName, "%q: want 1-100 letters, digits, '-' or '_', starting with a letter or digit", c.ClusterName)
	case c.NodeRoleArn == "" && len(c.ClusterName) > 64-len(nodeRolePrefix):
		bad(CtxClusterName, "%q is too long for the created node role name %s<name> (64 characters); pass an existing role with -c %s", c.ClusterName, nodeRolePrefix, CtxNodeRoleArn)
	}
	switch c.Kind {
	case KindEKS:
		if c.SecretArn != "" {
			bad(CtxClusterSecretArn, "only for -c %s=self-managed (EKS access uses the functions' IAM role and an access entry)", CtxClusterKind)
		}
	case KindSelfManaged:
		if c.SecretArn == "" {
			bad(CtxClusterSecretArn, "required for a self-managed cluster: the Secrets Manager secret holding {\"endpoint\",\"caData\",\"token\"}")
		} else if !secretArnPattern.MatchString(c.SecretArn) {
			bad(CtxClusterSecretArn, "%q is not a Secrets Manager secret ARN (arn:aws:secretsmanager:<region>:<account>:secret:<name>-<suffix>)", c.SecretArn)
		}
		if c.BootstrapTokenParameter == "" && c.BootstrapTokenSecretArn == "" {
			c.BootstrapTokenParameter = "/joiner/" + c.ClusterName + "/bootstrap-token"
		}
		if get(CtxNodeAccessEntry) != nil && c.NodeAccessEntry {
			bad(CtxNodeAccessEntry, "access entries exist only on EKS")
		}
		c.NodeAccessEntry = false
	default:
		bad(CtxClusterKind, "%q: want eks or self-managed", c.Kind)
	}
	switch {
	case c.BootstrapTokenSecretArn != "" && c.BootstrapTokenParameter != "":
		bad(CtxBootstrapTokenSecretArn, "set either %s or %s: the node reads the token from one place", CtxBootstrapTokenParameter, CtxBootstrapTokenSecretArn)
	case c.BootstrapTokenSecretArn != "" && !secretArnPattern.MatchString(c.BootstrapTokenSecretArn):
		bad(CtxBootstrapTokenSecretArn, "%q is not a Secrets Manager secret ARN (arn:aws:secretsmanager:<region>:<account>:secret:<name>-<suffix>)", c.BootstrapTokenSecretArn)
	}
	if c.BootstrapTokenParameter != "" && (!ssmNamePattern.MatchString(c.BootstrapTokenParameter) || strings.HasPrefix(c.BootstrapTokenParameter, "/aws/")) {
		bad(CtxBootstrapTokenParameter, "%q: want an SSM parameter name like /joiner/<cluster>/bootstrap-token (not under /aws/)", c.BootstrapTokenParameter)
	}

	if c.ServiceCIDR != "" {
		if _, n, err := net.ParseCIDR(c.ServiceCIDR); err != nil {
			bad(CtxServiceCIDR, "%q: want the cluster's service CIDR, such as 10.96.0.0/12 (kubeadm's --service-cidr)", c.ServiceCIDR)
		} else if n.String() != c.ServiceCIDR {
			bad(CtxServiceCIDR, "%q is not a network address (did you mean %s?)", c.ServiceCIDR, n)
		}
	}

	// Networking.
	if (len(c.SubnetIDs) == 0) != (len(c.SecurityGroupIDs) == 0) {
		errs = append(errs, fmt.Errorf("-c %s and -c %s: set both (the functions then run in those subnets, needed for a private API endpoint) or neither", CtxSubnetIDs, CtxSecurityGroupIDs))
	}
	for _, s := range c.SubnetIDs {
		if !subnetPattern.MatchString(s) {
			bad(CtxSubnetIDs, "%q is not a subnet ID", s)
		}
	}
	for _, s := range c.SecurityGroupIDs {
		if !sgPattern.MatchString(s) {
			bad(CtxSecurityGroupIDs, "%q is not a security group ID", s)
		}
	}

	// Nodes.
	if c.NodeRoleArn != "" && !roleArnPattern.MatchString(c.NodeRoleArn) {
		bad(CtxNodeRoleArn, "%q is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)", c.NodeRoleArn)
	}

	// The forwarder's credentials.
	switch c.ForwarderAuth {
	case AuthIRSA:
		if c.OIDCProviderArn == "" {
			bad(CtxOIDCProviderArn, "required for -c %s=irsa: the cluster's IAM OIDC provider (aws iam list-open-id-connect-providers), or use -c %s=pod-identity on EKS", CtxForwarderAuth, CtxForwarderAuth)
		} else if m := oidcArnPattern.FindStringSubmatch(c.OIDCProviderArn); m == nil {
			bad(CtxOIDCProviderArn, "%q is not an IAM OIDC provider ARN (arn:aws:iam::<account>:oidc-provider/<issuer host/path>)", c.OIDCProviderArn)
		} else {
			fromArn := m[1]
			issuer := strings.TrimSuffix(strings.TrimPrefix(c.OIDCIssuer, "https://"), "/")
			switch {
			case issuer == "":
				c.OIDCIssuer = fromArn
			case issuer != fromArn:
				bad(CtxOIDCIssuer, "%q does not match the provider ARN's issuer %q", c.OIDCIssuer, fromArn)
			default:
				c.OIDCIssuer = issuer
			}
			if u, err := url.Parse("https://" + c.OIDCIssuer); err != nil || u.Host == "" {
				bad(CtxOIDCIssuer, "%q is not an issuer URL", c.OIDCIssuer)
			}
		}
	case AuthPodIdentity:
		if c.Kind != KindEKS {
			bad(CtxForwarderAuth, "pod-identity needs EKS (its agent is an EKS add-on); use irsa with the cluster's OIDC provider")
		}
		if c.OIDCProviderArn != "" || c.OIDCIssuer != "" {
			bad(CtxOIDCProviderArn, "only for -c %s=irsa", CtxForwarderAuth)
		}
	default:
		bad(CtxForwarderAuth, "%q: want irsa or pod-identity", c.ForwarderAuth)
	}
	if !k8sNamePattern.MatchString(c.ForwarderNamespace) || len(c.ForwarderNamespace) > 63 {
		bad(CtxForwarderNamespace, "%q is not a Kubernetes namespace name", c.ForwarderNamespace)
	}
	if !k8sNamePattern.MatchString(c.ForwarderServiceAccount) || len(c.ForwarderServiceAccount) > 253 {
		bad(CtxForwarderServiceAccount, "%q is not a Kubernetes service account name", c.ForwarderServiceAccount)
	}

	// Behaviour.
	for key, rate := range map[string]string{CtxScheduleRate: c.ScheduleRate, CtxConsolidationRate: c.ConsolidationRate} {
		m := ratePattern.FindStringSubmatch(rate)
		if m == nil {
			bad(key, "%q: want \"<n> minute(s)|hour(s)|day(s)\", like \"1 minute\"", rate)
			continue
		}
		if (m[1] == "1") != !strings.HasSuffix(m[2], "s") {
			bad(key, "%q: EventBridge wants the singular unit for 1 and the plural otherwise", rate)
		}
	}
	if c.Mode != "act" && c.Mode != "shadow" {
		bad(CtxMode, "%q: want act or shadow", c.Mode)
	} else if c.Mode == "shadow" && c.DryRun {
		bad(CtxMode, "shadow with -c dryRun=true: pick one (shadow already writes nothing)")
	}
	if !slices.Contains(rebalanceModes, c.RebalanceMode) {
		bad(CtxRebalanceMode, "%q: want one of %s", c.RebalanceMode, strings.Join(rebalanceModes, ", "))
	}
	if !slices.Contains([]string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"}, c.LogLevel) {
		bad(CtxLogLevel, "%q: want TRACE, DEBUG, INFO, WARN, ERROR or FATAL", c.LogLevel)
	}
	if _, ok := logRetention[c.LogRetentionDays]; !ok {
		bad(CtxLogRetentionDays, "%d is not a CloudWatch Logs retention (1, 3, 5, 7, 14, 30, 60, 90, ... 3653)", c.LogRetentionDays)
	}
	if c.AlarmTopicArn != "" && !topicArnPattern.MatchString(c.AlarmTopicArn) {
		bad(CtxAlarmTopicArn, "%q is not an SNS topic ARN", c.AlarmTopicArn)
	}
	if len(c.StackName) > 128 || !regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]*$`).MatchString(c.StackName) {
		bad(CtxStackName, "%q is not a CloudFormation stack name (letters, digits, '-', starting with a letter)", c.StackName)
	}
	return c, errors.Join(errs...)
}

// NodeRoleName is the node role's name: from the ARN, or the name the stack gives it.
func (c Config) NodeRoleName() string {
	if m := roleArnPattern.FindStringSubmatch(c.NodeRoleArn); m != nil {
		return m[1]
	}
	return nodeRolePrefix + c.ClusterName
}

const nodeRolePrefix = "JoinerNodeRole-"
