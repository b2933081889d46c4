package main

import "github.com/joiner-autoscaler/joiner/shared/kube/access"

// Environment variables the stack sets on every function. Cluster access uses the
// names shared/kube/access reads, so there is one definition of each.
const (
	EnvClusterAccess = access.EnvMode        // eks | self-managed
	EnvClusterName   = access.EnvClusterName // the cluster's name (EKS name; ownership tag)
	EnvSecretArn     = access.EnvSecretARN   // self-managed: endpoint, CA and token

	EnvDryRun        = "JOINER_DRY_RUN"        // "true": decide and log, mutate nothing
	EnvRebalanceMode = "JOINER_REBALANCE_MODE" // ignore | taint | replace
	EnvMode          = "JOINER_MODE"           // act | shadow: shadow decides and records only
	EnvClusterCIDR   = "JOINER_CLUSTER_CIDR"   // the service CIDR (-c serviceCidr), for user data
)

// The figures of the functions' "metrics" log line (shared/handlers.MetricsMessage),
// which the dashboard charts with Logs Insights.
const (
	MetricsMessage             = "metrics"
	MetricPodsPending          = "PodsPending"
	MetricNodesLaunched        = "NodesLaunched"
	MetricNodesTerminated      = "NodesTerminated"
	MetricInterruptionsHandled = "InterruptionsHandled"
	MetricDecisionMillis       = "DecisionMillis"
	MetricSavingsPerHour       = "SavingsPerHour"
)

// MetricsQuery is the Logs Insights query charting stats (e.g. "max(PodsPending)")
// of the metrics lines over time.
func MetricsQuery(stats string) string {
	return `fields @timestamp | filter msg = "` + MetricsMessage + `" | stats ` + stats + ` by bin(5m)`
}

// FunctionsGroup is the Kubernetes group the functions' role maps to (EKS access
// entry); deploy/'s RBAC binds it.
const FunctionsGroup = "joiner:functions"

// OwnershipTagKey is the tag every resource Joiner launches carries with value "owned";
// the IAM policy conditions every mutating EC2 action on it.
func OwnershipTagKey(cluster string) string { return "kubernetes.io/cluster/" + cluster }

// ShadowMemoryParameter is the SSM parameter the functions keep shadow mode's memory
// in (shared/handlers.ShadowMemoryParameter, which the functions read; the stack
// grants access to it only in shadow mode).
func ShadowMemoryParameter(cluster string) string { return "/joiner/" + cluster + "/shadow-memory" }

// NodePoolTagKey is the second ownership tag on instances (the NodePool's name).
const NodePoolTagKey = "karpenter.sh/nodepool"

// NodeClassTagKey tags what Joiner creates for an EC2NodeClass (instance
// profiles, launch templates) with the class's name, as Karpenter does.
const NodeClassTagKey = "karpenter.k8s.aws/ec2nodeclass"
