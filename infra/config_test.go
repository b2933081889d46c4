package main

import (
	"reflect"
	"strings"
	"testing"
)

func ctxGetter(m map[string]any) Getter { return func(k string) any { return m[k] } }

func TestConfigDefaults(t *testing.T) {
	c, err := ConfigFromContext(ctxGetter(map[string]any{CtxClusterName: "prod", CtxOIDCProviderArn: oidcArn}))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		StackName: "Joiner-prod", ClusterName: "prod", Kind: KindEKS, NodeAccessEntry: true,
		ForwarderAuth: AuthIRSA, OIDCProviderArn: oidcArn, OIDCIssuer: oidcIssuer,
		ForwarderNamespace: "joiner", ForwarderServiceAccount: "joiner-forwarder",
		ScheduleRate: "1 minute", ConsolidationRate: "1 minute", RebalanceMode: "ignore", Mode: "act",
		LogLevel: "INFO", LogRetentionDays: 30, DistDir: "../dist",
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("defaults\n got %+v\nwant %+v", c, want)
	}
	if c.NodeRoleName() != "JoinerNodeRole-prod" {
		t.Errorf("node role name %q", c.NodeRoleName())
	}
}

// Values as cdk.json would give them (JSON types) and as -c gives them (strings).
func TestConfigValueForms(t *testing.T) {
	c, err := ConfigFromContext(ctxGetter(map[string]any{
		CtxClusterName: "kubean_prod", CtxClusterKind: "self-managed", CtxClusterSecretArn: secretArn,
		CtxOIDCProviderArn: kubeanOIDC, CtxOIDCIssuer: "https://s3.us-east-1.amazonaws.com/kubean-prod-oidc/",
		CtxDryRun: true, CtxLogRetentionDays: float64(7), CtxSubnetIDs: []any{"subnet-0123456789abcdef0"},
		CtxSecurityGroupIDs: "sg-0123456789abcdef0, sg-0123456789abcdef1", CtxNodeRoleArn: "arn:aws:iam::123456789012:role/nodes/KarpenterNodeRole-x",
		CtxScheduleRate: "5 minutes", CtxRebalanceMode: "replace", CtxLogLevel: "warn",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !c.DryRun || c.LogRetentionDays != 7 || !reflect.DeepEqual(c.SubnetIDs, []string{"subnet-0123456789abcdef0"}) ||
		!reflect.DeepEqual(c.SecurityGroupIDs, []string{"sg-0123456789abcdef0", "sg-0123456789abcdef1"}) ||
		c.OIDCIssuer != "s3.us-east-1.amazonaws.com/kubean-prod-oidc" || c.StackName != "Joiner-kubean-prod" ||
		c.NodeRoleName() != "KarpenterNodeRole-x" || c.NodeAccessEntry || c.ConsolidationRate != "5 minutes" ||
		c.BootstrapTokenParameter != "/joiner/kubean_prod/bootstrap-token" || c.LogLevel != "WARN" {
		t.Errorf("%+v", c)
	}
}

// Each bad configuration fails with an error that names the context key and the fix.
func TestConfigErrors(t *testing.T) {
	base := func(extra map[string]any) map[string]any {
		m := map[string]any{CtxClusterName: "prod", CtxOIDCProviderArn: oidcArn}
		for k, v := range extra {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return m
	}
	cases := map[string]struct {
		ctx  map[string]any
		want []string
	}{
		"no cluster":          {base(map[string]any{CtxClusterName: nil}), []string{"-c clusterName: required"}},
		"bad cluster":         {base(map[string]any{CtxClusterName: "-bad name"}), []string{`-c clusterName: "-bad name"`}},
		"long cluster":        {base(map[string]any{CtxClusterName: strings.Repeat("a", 60)}), []string{"too long for the created node role", "-c nodeRoleArn"}},
		"bad kind":            {base(map[string]any{CtxClusterKind: "gke"}), []string{`-c clusterKind: "gke": want eks or self-managed`}},
		"self-managed no arn": {base(map[string]any{CtxClusterKind: "self-managed"}), []string{"-c clusterSecretArn: required for a self-managed cluster"}},
		"bad secret":          {base(map[string]any{CtxClusterKind: "self-managed", CtxClusterSecretArn: "my-secret"}), []string{"is not a Secrets Manager secret ARN"}},
		"secret on eks":       {base(map[string]any{CtxClusterSecretArn: secretArn}), []string{"only for -c clusterKind=self-managed"}},
		"bad service cidr":    {base(map[string]any{CtxServiceCIDR: "10.96.0.0"}), []string{`-c serviceCidr: "10.96.0.0": want the cluster's service CIDR`}},
		"host service cidr":   {base(map[string]any{CtxServiceCIDR: "10.96.0.10/12"}), []string{`-c serviceCidr: "10.96.0.10/12" is not a network address (did you mean 10.96.0.0/12?)`}},
		"endpoint":            {base(map[string]any{"clusterEndpoint": "https://x"}), []string{"-c clusterEndpoint: not used"}},
		"subnets only":        {base(map[string]any{CtxSubnetIDs: "subnet-0123456789abcdef0"}), []string{"set both"}},
		"bad subnet":          {base(map[string]any{CtxSubnetIDs: "vpc-1", CtxSecurityGroupIDs: "sg-0123456789abcdef0"}), []string{`"vpc-1" is not a subnet ID`}},
		"bad sg":              {base(map[string]any{CtxSubnetIDs: "subnet-0123456789abcdef0", CtxSecurityGroupIDs: "default"}), []string{`"default" is not a security group ID`}},
		"bad role":            {base(map[string]any{CtxNodeRoleArn: "KarpenterNodeRole"}), []string{"is not an IAM role ARN"}},
		"irsa no oidc":        {base(map[string]any{CtxOIDCProviderArn: nil}), []string{"-c oidcProviderArn: required for -c forwarderAuth=irsa"}},
		"bad oidc":            {base(map[string]any{CtxOIDCProviderArn: "oidc.eks.us-east-1.amazonaws.com/id/X"}), []string{"is not an IAM OIDC provider ARN"}},
		"issuer mismatch":     {base(map[string]any{CtxOIDCIssuer: "https://oidc.eks.us-west-2.amazonaws.com/id/Y"}), []string{"does not match the provider ARN's issuer"}},
		"pod identity oidc":   {base(map[string]any{CtxForwarderAuth: "pod-identity"}), []string{"only for -c forwarderAuth=irsa"}},
		"pod identity self-managed": {base(map[string]any{CtxForwarderAuth: "pod-identity", CtxOIDCProviderArn: nil, CtxClusterKind: "self-managed", CtxClusterSecretArn: secretArn}),
			[]string{"pod-identity needs EKS"}},
		"bad auth":               {base(map[string]any{CtxForwarderAuth: "keys"}), []string{`"keys": want irsa or pod-identity`}},
		"bad namespace":          {base(map[string]any{CtxForwarderNamespace: "Joiner"}), []string{"is not a Kubernetes namespace name"}},
		"bad sa":                 {base(map[string]any{CtxForwarderServiceAccount: "a_b"}), []string{"is not a Kubernetes service account name"}},
		"bad rate":               {base(map[string]any{CtxScheduleRate: "every minute"}), []string{`-c scheduleRate: "every minute"`}},
		"plural rate":            {base(map[string]any{CtxConsolidationRate: "1 minutes"}), []string{"singular unit for 1"}},
		"bad rebalance":          {base(map[string]any{CtxRebalanceMode: "panic"}), []string{"want one of ignore, taint, replace"}},
		"bad dry run":            {base(map[string]any{CtxDryRun: "maybe"}), []string{`-c dryRun: "maybe" is not true or false`}},
		"bad mode":               {base(map[string]any{CtxMode: "watch"}), []string{`-c mode: "watch": want act or shadow`}},
		"shadow dry run":         {base(map[string]any{CtxMode: "shadow", CtxDryRun: true}), []string{"-c mode: shadow with -c dryRun=true: pick one"}},
		"bad log level":          {base(map[string]any{CtxLogLevel: "loud"}), []string{"-c logLevel"}},
		"bad retention":          {base(map[string]any{CtxLogRetentionDays: "10"}), []string{"10 is not a CloudWatch Logs retention"}},
		"bad topic":              {base(map[string]any{CtxAlarmTopicArn: "alarms"}), []string{"is not an SNS topic ARN"}},
		"bad token param":        {base(map[string]any{CtxBootstrapTokenParameter: "/aws/service/x"}), []string{"not under /aws/"}},
		"bad token secret":       {base(map[string]any{CtxBootstrapTokenSecretArn: "kubeadm"}), []string{"not a Secrets Manager secret ARN"}},
		"token param and secret": {base(map[string]any{CtxBootstrapTokenParameter: "/joiner/x", CtxBootstrapTokenSecretArn: "arn:aws:secretsmanager:us-east-1:123456789012:secret:kubeadm-AbCdEf"}), []string{"set either"}},
		"node entry on self-managed": {base(map[string]any{CtxClusterKind: "self-managed", CtxClusterSecretArn: secretArn, CtxNodeAccessEntry: true}),
			[]string{"access entries exist only on EKS"}},
		"wrong type": {base(map[string]any{CtxClusterName: 42.0}), []string{"-c clusterName: want a string"}},
		// Every problem at once, not one per attempt.
		"several": {base(map[string]any{CtxClusterKind: "gke", CtxRebalanceMode: "x", CtxDryRun: "y"}), []string{"clusterKind", "rebalanceMode", "dryRun"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ConfigFromContext(ctxGetter(c.ctx))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// Without the real binaries the stack refuses to synthesize, naming the fix.
func TestMissingBootstrap(t *testing.T) {
	_, err := functionAssetDirs(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "make functions") || !strings.Contains(err.Error(), "provisioner/bootstrap") {
		t.Fatalf("error %v", err)
	}
}
