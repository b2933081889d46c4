package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/joiner-autoscaler/joiner/events"
)

const (
	partition = "${AWS::Partition}"
	region    = "${AWS::Region}"
	account   = "${AWS::AccountId}"
)

// nagLine is one row of cdk-nag's JSON compliance report.
type nagLine struct {
	RuleID          string `json:"ruleId"`
	ResourceID      string `json:"resourceId"`
	Compliance      string `json:"compliance"`
	ExceptionReason string `json:"exceptionReason"`
	RuleLevel       string `json:"ruleLevel"`
}

// AwsSolutions: no unsuppressed finding, errors or warnings; every suppression carries
// a reason. The report's compliant rows show the checks really ran.
func TestNagAwsSolutions(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		ann := assertions.Annotations_FromStack(s.stack.Stack)
		for _, find := range []func(*string, interface{}) *[]*cxapi.SynthesisMessage{ann.FindError, ann.FindWarning} {
			for _, m := range *find(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))) {
				t.Errorf("unsuppressed: %s %v", *m.Id, m.Entry.Data)
			}
		}
		reports, _ := filepath.Glob(filepath.Join(s.outdir, "AwsSolutions-*"+s.cfg.StackName+"-NagReport.json"))
		if len(reports) != 1 {
			t.Fatalf("nag reports %v", reports)
		}
		raw, err := os.ReadFile(reports[0])
		if err != nil {
			t.Fatal(err)
		}
		var report struct{ Lines []nagLine }
		if err := json.Unmarshal(raw, &report); err != nil {
			t.Fatal(err)
		}
		counts := map[string]int{}
		suppressed := map[string]bool{}
		for _, l := range report.Lines {
			counts[l.Compliance]++
			switch l.Compliance {
			case "Compliant", "Not Applicable":
			case "Suppressed":
				if len(l.ExceptionReason) < 60 {
					t.Errorf("%s on %s suppressed with a thin reason %q", l.RuleID, l.ResourceID, l.ExceptionReason)
				}
				suppressed[l.RuleID+" "+l.ResourceID] = true
			default:
				t.Errorf("%s on %s: %s", l.RuleID, l.ResourceID, l.Compliance)
			}
		}
		if counts["Compliant"] < 20 {
			t.Errorf("only %d compliant checks: is cdk-nag running? %v", counts["Compliant"], counts)
		}
		// Every suppression in the template silences a finding nag actually made: none
		// is stale or speculative.
		for _, res := range s.tmpl["Resources"].(map[string]any) {
			meta, _ := res.(map[string]any)["Metadata"].(map[string]any)
			nag, _ := meta["cdk_nag"].(map[string]any)
			if nag == nil {
				continue
			}
			path, _ := meta["aws:cdk:path"].(string)
			for _, r := range nag["rules_to_suppress"].([]any) {
				id := r.(map[string]any)["id"].(string)
				if !suppressed[id+" "+path] {
					t.Errorf("suppression %s on %s matches no finding", id, path)
				}
			}
		}
		keys := make([]string, 0, len(suppressed))
		for k := range suppressed {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		t.Logf("nag rows %v; suppressed: %s", counts, strings.Join(keys, "; "))
	})
}

// The nag wiring finds a real violation, so a clean report above means something.
func TestNagCatchesViolations(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	st := awscdk.NewStack(app, jsii.String("NagCanary"), nil)
	awssqs.NewQueue(st, jsii.String("PlainQueue"), &awssqs.QueueProps{})
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(nil), nil)
	errs := assertions.Annotations_FromStack(st).FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-SQS.*")))
	if len(*errs) == 0 {
		t.Fatal("cdk-nag reported nothing for a queue without DLQ or TLS enforcement")
	}
}

func TestResourceCounts(t *testing.T) {
	want := map[string]map[string]int{
		"eks": {
			"AWS::Lambda::Function": 3, "AWS::Lambda::EventInvokeConfig": 3, "AWS::Lambda::Permission": 3,
			"AWS::Logs::LogGroup": 3, "AWS::Events::Rule": 3, "AWS::Events::EventBus": 1, "AWS::Events::EventBusPolicy": 0,
			"AWS::Scheduler::Schedule": 2, "AWS::SQS::Queue": 4, "AWS::SQS::QueuePolicy": 4, "AWS::CloudWatch::Alarm": 4,
			"AWS::CloudWatch::Dashboard": 1, "AWS::IAM::Role": 4, "AWS::IAM::Policy": 4, "AWS::IAM::InstanceProfile": 0,
			"AWS::EKS::AccessEntry": 2, "AWS::EKS::PodIdentityAssociation": 0,
		},
		"eks-podid-vpc": {
			"AWS::Lambda::Function": 3, "AWS::Events::Rule": 3, "AWS::Scheduler::Schedule": 2, "AWS::SQS::Queue": 5,
			"AWS::SQS::QueuePolicy": 5, "AWS::CloudWatch::Alarm": 4, "AWS::IAM::Role": 3, "AWS::IAM::InstanceProfile": 0,
			"AWS::EKS::AccessEntry": 1, "AWS::EKS::PodIdentityAssociation": 1,
		},
		"self-managed": {
			"AWS::Lambda::Function": 3, "AWS::Events::Rule": 3, "AWS::Scheduler::Schedule": 2, "AWS::SQS::Queue": 4,
			"AWS::CloudWatch::Alarm": 4, "AWS::IAM::Role": 4, "AWS::IAM::InstanceProfile": 0,
			"AWS::EKS::AccessEntry": 0, "AWS::EKS::PodIdentityAssociation": 0,
		},
	}
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		for typ, n := range want[s.name] {
			s.template.ResourceCountIs(jsii.String(typ), jsii.Number(n))
		}
	})
}

// One source of truth: the synthesized rules carry exactly the events/ patterns.
func TestRulePatternsAreTheEventsPatterns(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		for prefix, p := range map[string]events.Pattern{
			"InterruptionEC2Rule":    events.InterruptionEC2Pattern(),
			"InterruptionHealthRule": events.InterruptionHealthPattern(),
			"PendingPodsRule":        events.PendingPodsPattern(),
		} {
			r := s.byPrefix(t, "AWS::Events::Rule", prefix)
			if got, want := r.Properties["EventPattern"], generic(t, p); !reflect.DeepEqual(got, want) {
				t.Errorf("%s pattern\n got %s\nwant %s", prefix, asJSON(got), asJSON(want))
			}
			bus, onJoinerBus := r.Properties["EventBusName"]
			if onJoinerBus != (prefix == "PendingPodsRule") {
				t.Errorf("%s: on Joiner's bus = %v", prefix, onJoinerBus)
			}
			if onJoinerBus && bus != "joiner-"+s.cfg.ClusterName {
				t.Errorf("%s: EventBusName %v, want joiner-%s", prefix, bus, s.cfg.ClusterName)
			}
		}
	})
}

// Delivery: each rule targets the right function with its retry policy and the DLQ.
func TestRuleTargets(t *testing.T) {
	s := synth(t, "eks")
	for prefix, want := range map[string]struct {
		fn              string
		age, maxRetries float64
	}{
		"InterruptionEC2Rule":    {"Interruption", ec2RuleMaxAgeSec, ec2RuleRetries},
		"InterruptionHealthRule": {"Interruption", healthRuleMaxAgeSec, healthRuleRetries},
		"PendingPodsRule":        {"Provisioner", podsRuleMaxAgeSec, podsRuleRetries},
	} {
		targets := render(s.byPrefix(t, "AWS::Events::Rule", prefix).Properties["Targets"]).([]any)
		if len(targets) != 1 {
			t.Fatalf("%s: %d targets", prefix, len(targets))
		}
		tg := targets[0].(map[string]any)
		if tg["Arn"] != "${"+want.fn+".Arn}" {
			t.Errorf("%s targets %v", prefix, tg["Arn"])
		}
		rp := tg["RetryPolicy"].(map[string]any)
		if rp["MaximumEventAgeInSeconds"] != want.age || rp["MaximumRetryAttempts"] != want.maxRetries {
			t.Errorf("%s retry policy %v", prefix, rp)
		}
		if dlq := tg["DeadLetterConfig"].(map[string]any)["Arn"].(string); !strings.HasPrefix(dlq, "${DeliveryDLQ") {
			t.Errorf("%s DLQ %v", prefix, dlq)
		}
	}
	// EventBridge may invoke each function only from its own rules.
	perms := map[string][]string{}
	for _, p := range s.resources("AWS::Lambda::Permission") {
		pr := render(p.Properties).(map[string]any)
		if pr["Principal"] != "events.amazonaws.com" || pr["Action"] != "lambda:InvokeFunction" {
			t.Errorf("permission %s: %v", p.ID, pr)
		}
		perms[pr["FunctionName"].(string)] = append(perms[pr["FunctionName"].(string)], pr["SourceArn"].(string))
	}
	if len(perms["${Interruption.Arn}"]) != 2 || len(perms["${Provisioner.Arn}"]) != 1 || len(perms) != 2 {
		t.Errorf("invoke permissions %v", perms)
	}
}

// -c recordQueue=true: every rule delivers to the record queue as well (and only
// EventBridge, from those rules, may send to it); without it there is no such queue.
func TestRecordQueue(t *testing.T) {
	if n := len(synth(t, "eks").resources("AWS::SQS::Queue")); n != 4 {
		t.Errorf("without recordQueue: %d queues, want the 4 dead-letter queues", n)
	}
	s := synth(t, "eks-podid-vpc")
	q := s.byPrefix(t, "AWS::SQS::Queue", "RecordQueue")
	var rules []string
	for _, prefix := range []string{"InterruptionEC2Rule", "InterruptionHealthRule", "PendingPodsRule"} {
		r := s.byPrefix(t, "AWS::Events::Rule", prefix)
		rules = append(rules, "${"+r.ID+".Arn}")
		var arns []string
		for _, tg := range render(r.Properties["Targets"]).([]any) {
			arns = append(arns, tg.(map[string]any)["Arn"].(string))
		}
		if len(arns) != 2 || !slices.Contains(arns, "${"+q.ID+".Arn}") {
			t.Errorf("%s targets %v, want its function and %s", prefix, arns, q.ID)
		}
	}
	var senders []string
	for _, qp := range s.resources("AWS::SQS::QueuePolicy") {
		p := render(qp.Properties).(map[string]any)
		if !slices.Contains(strs(p["Queues"]), "${"+q.ID+"}") {
			continue
		}
		for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := st.(map[string]any)
			if st["Effect"] == "Allow" {
				// CDK's SqsQueue target grants send plus the two reads of its grantSendMessages.
				if actions := strs(st["Action"]); st["Principal"].(map[string]any)["Service"] != "events.amazonaws.com" ||
					!reflect.DeepEqual(actions, []string{"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}) {
					t.Errorf("record queue statement %v", st)
				}
				senders = append(senders, st["Condition"].(map[string]any)["ArnEquals"].(map[string]any)["aws:SourceArn"].(string))
			}
		}
	}
	sort.Strings(senders)
	sort.Strings(rules)
	if !reflect.DeepEqual(senders, rules) {
		t.Errorf("record queue senders %v, want the rules %v", senders, rules)
	}
	if _, ok := s.tmpl["Outputs"].(map[string]any)["RecordQueueUrl"]; !ok {
		t.Error("no RecordQueueUrl output")
	}
}

func TestFunctions(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		for _, spec := range Functions {
			id := strings.ToUpper(spec.Name[:1]) + spec.Name[1:]
			r := s.resource(t, id)
			p := render(r.Properties).(map[string]any)
			if p["Runtime"] != "provided.al2023" || !reflect.DeepEqual(p["Architectures"], []any{"arm64"}) || p["Handler"] != "bootstrap" {
				t.Errorf("%s: runtime %v arch %v handler %v", id, p["Runtime"], p["Architectures"], p["Handler"])
			}
			if p["MemorySize"] != spec.MemoryMB || p["Timeout"] != spec.TimeoutSec {
				t.Errorf("%s: memory %v timeout %v", id, p["MemorySize"], p["Timeout"])
			}
			if p["Role"] != "${FunctionsRole5FB35DA3.Arn}" {
				t.Errorf("%s: role %v", id, p["Role"])
			}
			lc := p["LoggingConfig"].(map[string]any)
			if lc["LogFormat"] != "JSON" || lc["ApplicationLogLevel"] != s.cfg.LogLevel || lc["SystemLogLevel"] != "WARN" ||
				!strings.HasPrefix(lc["LogGroup"].(string), "${"+id+"Logs") {
				t.Errorf("%s: logging %v", id, lc)
			}
			if dlq := p["DeadLetterConfig"].(map[string]any)["TargetArn"].(string); !strings.HasPrefix(dlq, "${"+id+"DLQ") {
				t.Errorf("%s: DLQ %v", id, dlq)
			}
			env := p["Environment"].(map[string]any)["Variables"].(map[string]any)
			// Only what the functions read: the node role comes from each
			// EC2NodeClass's spec.role, the join token from its annotations.
			wantEnv := map[string]any{
				EnvClusterAccess: string(s.cfg.Kind), EnvClusterName: s.cfg.ClusterName,
				EnvDryRun: map[bool]string{true: "true", false: "false"}[s.cfg.DryRun], EnvRebalanceMode: s.cfg.RebalanceMode, EnvMode: s.cfg.Mode,
			}
			if s.cfg.Kind == KindSelfManaged {
				wantEnv[EnvSecretArn] = secretArn
				wantEnv[EnvClusterCIDR] = "10.96.0.0/12"
			}
			if !reflect.DeepEqual(env, wantEnv) {
				t.Errorf("%s env\n got %s\nwant %s", id, asJSON(env), asJSON(wantEnv))
			}
			vpc, inVPC := p["VpcConfig"].(map[string]any)
			if inVPC != (len(s.cfg.SubnetIDs) > 0) {
				t.Errorf("%s: VpcConfig %v", id, vpc)
			} else if inVPC && (!reflect.DeepEqual(strs(vpc["SubnetIds"]), s.cfg.SubnetIDs) || !reflect.DeepEqual(strs(vpc["SecurityGroupIds"]), s.cfg.SecurityGroupIDs)) {
				t.Errorf("%s: VpcConfig %v", id, vpc)
			}
			// sam local invoke -t cdk.out/<stack>.template.json reads the code from here.
			assetDir := r.Metadata["aws:asset:path"]
			if r.Metadata["aws:asset:property"] != "Code" || assetDir == nil {
				t.Errorf("%s: asset metadata %v", id, r.Metadata)
			} else if fi, err := os.Stat(filepath.Join(s.outdir, assetDir.(string), "bootstrap")); err != nil || fi.Mode().Perm()&0o111 == 0 {
				t.Errorf("%s: staged asset %s has no executable bootstrap (%v)", id, assetDir, err)
			}
		}
		// Async invocation: retries and age per function.
		for _, c := range s.resources("AWS::Lambda::EventInvokeConfig") {
			p := render(c.Properties).(map[string]any)
			fn := strings.TrimSuffix(strings.TrimPrefix(p["FunctionName"].(string), "${"), "}")
			i := slices.IndexFunc(Functions, func(f FunctionSpec) bool { return strings.EqualFold(f.Name, fn) })
			if i < 0 || p["MaximumEventAgeInSeconds"] != Functions[i].AsyncMaxAgeSec || p["MaximumRetryAttempts"] != Functions[i].AsyncRetries {
				t.Errorf("event invoke config %v", p)
			}
		}
		for _, lg := range s.resources("AWS::Logs::LogGroup") {
			if lg.Properties["RetentionInDays"] != float64(s.cfg.LogRetentionDays) {
				t.Errorf("log group %s retention %v", lg.ID, lg.Properties["RetentionInDays"])
			}
		}
	})
}

// policyStatements collects every identity-policy statement of a role: inline policies
// in AWS::IAM::Policy resources attached to it and the role's own Policies.
func (s *synthesized) policyStatements(t *testing.T, roleID string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, p := range s.resources("AWS::IAM::Policy") {
		pr := render(p.Properties).(map[string]any)
		if !slices.Contains(strs(pr["Roles"]), "${"+roleID+"}") {
			continue
		}
		for _, st := range pr["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			out = append(out, st.(map[string]any))
		}
	}
	return out
}

func bySid(t *testing.T, stmts []map[string]any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, st := range stmts {
		sid, _ := st["Sid"].(string)
		if sid == "" {
			// CDK's own grants (the DLQ sends) have no Sid: merge them by action, their
			// resources in one sorted list.
			sid = strings.Join(strs(st["Action"]), ",")
			if prev, ok := out[sid]; ok {
				res := append(strs(prev["Resource"]), strs(st["Resource"])...)
				sort.Strings(res)
				merged := maps(prev)
				merged["Resource"] = toAny(res)
				out[sid] = merged
				continue
			}
		} else if _, dup := out[sid]; dup {
			t.Errorf("duplicate statement %s", sid)
		}
		out[sid] = st
	}
	return out
}

func ec2arn(res string) string {
	return "arn:" + partition + ":ec2:" + region + ":" + account + ":" + res
}
func ec2PublicArn(res string) string { return "arn:" + partition + ":ec2:" + region + "::" + res }

// expectedFunctionStatements is the functions' policy, statement by statement, in the
// rendered form of the template.
func expectedFunctionStatements(s *synthesized) map[string]map[string]any {
	owned := "kubernetes.io/cluster/" + s.cfg.ClusterName
	list := func(ss ...string) []any {
		out := make([]any, len(ss))
		for i, s := range ss {
			out[i] = s
		}
		return out
	}
	profiles := "arn:" + partition + ":iam::" + account + ":instance-profile/*"
	nodeRole := "${NodeRoleB5643E21.Arn}"
	if s.cfg.NodeRoleArn != "" {
		nodeRole = s.cfg.NodeRoleArn
	}
	var logs []any
	for _, spec := range Functions {
		id := strings.ToUpper(spec.Name[:1]) + spec.Name[1:] + "Logs"
		for _, lg := range s.resources("AWS::Logs::LogGroup") {
			if strings.HasPrefix(lg.ID, id) {
				logs = append(logs, "${"+lg.ID+".Arn}")
			}
		}
	}
	want := map[string]map[string]any{
		"EC2Read": {"Effect": "Allow", "Resource": "*", "Action": list(ec2Describe...)},
		"EC2LaunchUsingReadOnlyResources": {"Effect": "Allow", "Action": list("ec2:RunInstances", "ec2:CreateFleet"),
			"Resource": []any{ec2PublicArn("image/*"), ec2PublicArn("snapshot/*"), ec2arn("subnet/*"), ec2arn("security-group/*"), ec2arn("capacity-reservation/*")}},
		"EC2LaunchFromOwnedLaunchTemplates": {"Effect": "Allow", "Action": list("ec2:RunInstances", "ec2:CreateFleet"), "Resource": ec2arn("launch-template/*"),
			"Condition": map[string]any{"StringEquals": map[string]any{"aws:ResourceTag/" + owned: "owned"}}},
		"EC2CreateOwnedInstances": {"Effect": "Allow", "Action": list("ec2:RunInstances", "ec2:CreateFleet"), "Resource": []any{ec2arn("instance/*"), ec2arn("volume/*")},
			"Condition": map[string]any{"StringEquals": map[string]any{"aws:RequestTag/" + owned: "owned"}}},
		"EC2LaunchByproducts": {"Effect": "Allow", "Action": list("ec2:RunInstances", "ec2:CreateFleet"),
			"Resource":  []any{ec2arn("fleet/*"), ec2arn("network-interface/*"), ec2arn("spot-instances-request/*")},
			"Condition": map[string]any{"StringEquals": map[string]any{"aws:RequestTag/" + owned: "owned"}}},
		"EC2CreateOwnedLaunchTemplates": {"Effect": "Allow", "Action": "ec2:CreateLaunchTemplate", "Resource": ec2arn("launch-template/*"),
			"Condition": map[string]any{"StringEquals": map[string]any{"aws:RequestTag/" + owned: "owned"}}},
		"EC2TagOwnedResourcesOnCreate": {"Effect": "Allow", "Action": "ec2:CreateTags", "Resource": []any{ec2arn("instance/*"), ec2arn("volume/*"), ec2arn("launch-template/*"),
			ec2arn("fleet/*"), ec2arn("network-interface/*"), ec2arn("spot-instances-request/*")},
			"Condition": map[string]any{"StringEquals": map[string]any{"aws:RequestTag/" + owned: "owned", "ec2:CreateAction": list("RunInstances", "CreateFleet", "CreateLaunchTemplate")}}},
		"EC2TagOwnedInstances": {"Effect": "Allow", "Action": "ec2:CreateTags", "Resource": ec2arn("instance/*"),
			"Condition": map[string]any{
				"StringEquals":         map[string]any{"aws:ResourceTag/" + owned: "owned"},
				"StringLike":           map[string]any{"aws:ResourceTag/karpenter.sh/nodepool": "*"},
				"StringEqualsIfExists": map[string]any{"aws:RequestTag/" + owned: "owned"}}},
		"EC2TerminateOwnedInstances": {"Effect": "Allow", "Action": "ec2:TerminateInstances", "Resource": ec2arn("instance/*"),
			"Condition": map[string]any{
				"StringEquals": map[string]any{"aws:ResourceTag/" + owned: "owned"},
				"StringLike":   map[string]any{"aws:ResourceTag/karpenter.sh/nodepool": "*"}}},
		"EC2DeleteOwnedLaunchTemplates": {"Effect": "Allow", "Action": "ec2:DeleteLaunchTemplate", "Resource": ec2arn("launch-template/*"),
			"Condition": map[string]any{"StringEquals": map[string]any{"aws:ResourceTag/" + owned: "owned"}}},
		"PassNodeRoleToEC2": {"Effect": "Allow", "Action": "iam:PassRole", "Resource": nodeRole,
			"Condition": map[string]any{"StringEquals": map[string]any{"iam:PassedToService": "ec2.amazonaws.com"}}},
		// The instance profiles of classes with spec.role, scoped by the tags
		// Joiner (and Karpenter) put on them.
		"IAMReadInstanceProfiles": {"Effect": "Allow", "Action": "iam:GetInstanceProfile", "Resource": profiles},
		// IAM evaluates ListInstanceProfiles against "*" (Karpenter's
		// AllowUnscopedInstanceProfileListAction): scoped to profile ARNs it is denied.
		"IAMListInstanceProfiles": {"Effect": "Allow", "Action": "iam:ListInstanceProfiles", "Resource": "*"},
		"IAMCreateTaggedInstanceProfiles": {"Effect": "Allow", "Action": "iam:CreateInstanceProfile", "Resource": profiles,
			"Condition": map[string]any{
				"StringEquals": map[string]any{"aws:RequestTag/" + owned: "owned", "aws:RequestTag/eks:eks-cluster-name": s.cfg.ClusterName,
					"aws:RequestTag/topology.kubernetes.io/region": region},
				"StringLike": map[string]any{"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"}}},
		"IAMTagOwnedInstanceProfiles": {"Effect": "Allow", "Action": "iam:TagInstanceProfile", "Resource": profiles,
			"Condition": map[string]any{
				"StringEquals": map[string]any{"aws:RequestTag/" + owned: "owned", "aws:RequestTag/eks:eks-cluster-name": s.cfg.ClusterName,
					"aws:RequestTag/topology.kubernetes.io/region": region, "aws:ResourceTag/" + owned: "owned",
					"aws:ResourceTag/topology.kubernetes.io/region": region},
				"StringLike": map[string]any{"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*", "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"}}},
		"IAMManageOwnedInstanceProfiles": {"Effect": "Allow", "Action": list("iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"),
			"Resource": profiles,
			"Condition": map[string]any{
				"StringEquals": map[string]any{"aws:ResourceTag/" + owned: "owned", "aws:ResourceTag/topology.kubernetes.io/region": region},
				"StringLike":   map[string]any{"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"}}},
		"SSMReadPublicParameters": {"Effect": "Allow", "Action": "ssm:GetParameter", "Resource": "arn:" + partition + ":ssm:" + region + "::parameter/aws/service/*"},
		"PricingRead":             {"Effect": "Allow", "Action": "pricing:GetProducts", "Resource": "*"},
		"WriteOwnLogs":            {"Effect": "Allow", "Action": list("logs:CreateLogStream", "logs:PutLogEvents"), "Resource": logs},
		"sqs:SendMessage":         {"Effect": "Allow", "Action": "sqs:SendMessage"}, // resources checked separately
	}
	if s.cfg.Mode == "shadow" {
		want["ShadowMemoryParameter"] = map[string]any{"Effect": "Allow", "Action": list("ssm:GetParameter", "ssm:PutParameter"),
			"Resource": "arn:" + partition + ":ssm:" + region + ":" + account + ":parameter/joiner/" + s.cfg.ClusterName + "/shadow-memory"}
	}
	switch s.cfg.Kind {
	case KindEKS:
		want["EKSDescribeCluster"] = map[string]any{"Effect": "Allow", "Action": "eks:DescribeCluster",
			"Resource": "arn:" + partition + ":eks:" + region + ":" + account + ":cluster/" + s.cfg.ClusterName}
	case KindSelfManaged:
		want["ReadClusterSecret"] = map[string]any{"Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": secretArn}
	}
	return want
}

// Every statement and condition of the functions' policy, exactly.
func TestFunctionsPolicy(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		got := bySid(t, s.policyStatements(t, "FunctionsRole5FB35DA3"))
		want := expectedFunctionStatements(s)
		for sid, w := range want {
			g, ok := got[sid]
			if !ok {
				t.Errorf("missing statement %s", sid)
				continue
			}
			if sid == "sqs:SendMessage" {
				// Lambda sends failed async events to each function's DLQ with this role.
				res := strs(g["Resource"])
				sort.Strings(res)
				if len(res) != 3 || !strings.HasPrefix(res[0], "${ConsolidatorDLQ") || !strings.HasPrefix(res[1], "${InterruptionDLQ") || !strings.HasPrefix(res[2], "${ProvisionerDLQ") {
					t.Errorf("DLQ send resources %v", res)
				}
				continue
			}
			g = maps(g, "Sid")
			if !reflect.DeepEqual(g, w) {
				t.Errorf("statement %s\n got %s\nwant %s", sid, asJSON(g), asJSON(w))
			}
		}
		for sid := range got {
			if _, ok := want[sid]; !ok {
				t.Errorf("unexpected statement %s: %s", sid, asJSON(got[sid]))
			}
		}
		// Managed policies: only Lambda's VPC access policy, only in a VPC.
		role := render(s.resource(t, "FunctionsRole5FB35DA3").Properties).(map[string]any)
		managed := strs(role["ManagedPolicyArns"])
		if len(s.cfg.SubnetIDs) > 0 {
			if !reflect.DeepEqual(managed, []string{"arn:" + partition + ":iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"}) {
				t.Errorf("managed policies %v", managed)
			}
		} else if len(managed) != 0 {
			t.Errorf("managed policies %v outside a VPC", managed)
		}
		trust := role["AssumeRolePolicyDocument"].(map[string]any)["Statement"].([]any)
		if len(trust) != 1 || !reflect.DeepEqual(trust[0], map[string]any{"Action": "sts:AssumeRole", "Effect": "Allow",
			"Principal": map[string]any{"Service": "lambda.amazonaws.com"}}) {
			t.Errorf("functions trust %s", asJSON(trust))
		}
	})
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func maps(m map[string]any, drop ...string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if !slices.Contains(drop, k) {
			out[k] = v
		}
	}
	return out
}

var readOnlyVerb = regexp.MustCompile(`^[a-z0-9-]+:(Describe|Get|List)[A-Za-z]*$`)

// EC2 resource types RunInstances/CreateFleet only reference (never modify, often
// another account's, like public AMIs).
var referencedOnly = regexp.MustCompile(`:(image|snapshot|subnet|security-group|capacity-reservation)/\*$`)

// No statement anywhere in the stack lets a mutating action touch "*", and every
// mutating EC2 action on a resource Joiner could change requires the ownership tag.
func TestNoMutatingActionWithoutOwnership(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		owned := "kubernetes.io/cluster/" + s.cfg.ClusterName
		var all []map[string]any
		for _, p := range s.resources("AWS::IAM::Policy") {
			for _, st := range render(p.Properties).(map[string]any)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
				all = append(all, st.(map[string]any))
			}
		}
		for _, r := range s.resources("AWS::IAM::Role") {
			if r.Properties["Policies"] != nil {
				t.Errorf("role %s has inline policies outside AWS::IAM::Policy", r.ID)
			}
		}
		if len(s.resources("AWS::IAM::ManagedPolicy")) != 0 {
			t.Error("customer managed policies appeared; extend this test")
		}
		checked := 0
		for _, st := range all {
			if st["Effect"] != "Allow" {
				continue
			}
			cond, _ := json.Marshal(st["Condition"])
			tagged := strings.Contains(string(cond), `"aws:RequestTag/`+owned+`":"owned"`) || strings.Contains(string(cond), `"aws:ResourceTag/`+owned+`":"owned"`)
			for _, action := range strs(st["Action"]) {
				if readOnlyVerb.MatchString(action) {
					continue
				}
				checked++
				for _, res := range strs(st["Resource"]) {
					if res == "*" || res == "arn:"+partition+":ec2:"+region+":"+account+":*" {
						t.Errorf("%s on %q (statement %v)", action, res, st["Sid"])
					}
					switch {
					case !strings.HasPrefix(action, "ec2:") || tagged || referencedOnly.MatchString(res):
					default:
						t.Errorf("%s on %s without the %s ownership tag condition (statement %v)", action, res, owned, st["Sid"])
					}
				}
			}
		}
		if checked < 10 {
			t.Errorf("only %d mutating actions checked", checked)
		}
	})
}

// The forwarder role: trust bound to one service account (IRSA) or one Pod Identity
// association, and nothing but PutEvents of Pending Pods on Joiner's bus.
func TestForwarderRole(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		var roleID string
		for _, r := range s.resources("AWS::IAM::Role") {
			if strings.HasPrefix(r.ID, "ForwarderRole") {
				roleID = r.ID
			}
		}
		role := render(s.resource(t, roleID).Properties).(map[string]any)
		trust := role["AssumeRolePolicyDocument"].(map[string]any)["Statement"].([]any)
		var want map[string]any
		switch s.cfg.ForwarderAuth {
		case AuthIRSA:
			issuer := oidcIssuer
			if s.cfg.Kind == KindSelfManaged {
				issuer = "s3.us-east-1.amazonaws.com/kubean-prod-oidc"
			}
			want = map[string]any{
				"Action": "sts:AssumeRoleWithWebIdentity", "Effect": "Allow",
				"Principal": map[string]any{"Federated": s.cfg.OIDCProviderArn},
				"Condition": map[string]any{"StringEquals": map[string]any{
					issuer + ":sub": "system:serviceaccount:joiner:joiner-forwarder",
					issuer + ":aud": "sts.amazonaws.com",
				}},
			}
		case AuthPodIdentity:
			want = map[string]any{
				"Action": []any{"sts:AssumeRole", "sts:TagSession"}, "Effect": "Allow",
				"Principal": map[string]any{"Service": "pods.eks.amazonaws.com"},
				"Condition": map[string]any{"StringEquals": map[string]any{
					"aws:SourceAccount":                         account,
					"aws:RequestTag/eks-cluster-name":           s.cfg.ClusterName,
					"aws:RequestTag/kubernetes-namespace":       "joiner",
					"aws:RequestTag/kubernetes-service-account": "joiner-forwarder",
				}},
			}
			assoc := render(s.resources("AWS::EKS::PodIdentityAssociation")[0].Properties).(map[string]any)
			if !reflect.DeepEqual(assoc, map[string]any{"ClusterName": s.cfg.ClusterName, "Namespace": "joiner",
				"ServiceAccount": "joiner-forwarder", "RoleArn": "${" + roleID + ".Arn}"}) {
				t.Errorf("pod identity association %s", asJSON(assoc))
			}
		}
		if len(trust) != 1 || !reflect.DeepEqual(trust[0], want) {
			t.Errorf("trust\n got %s\nwant %s", asJSON(trust), asJSON(want))
		}
		if role["ManagedPolicyArns"] != nil {
			t.Errorf("forwarder has managed policies %v", role["ManagedPolicyArns"])
		}
		stmts := s.policyStatements(t, roleID)
		wantStmt := map[string]any{"Sid": "PutPendingPods", "Effect": "Allow", "Action": "events:PutEvents", "Resource": "${BusEA82B648.Arn}",
			"Condition": pendingPodsCondition}
		if len(stmts) != 1 || !reflect.DeepEqual(stmts[0], wantStmt) {
			t.Errorf("forwarder policy\n got %s\nwant %s", asJSON(stmts), asJSON(wantStmt))
		}
	})
}

// pendingPodsCondition is the forwarder's PutEvents condition as synthesized: every
// entry's source and detail-type (multivalued keys) must be the forwarder's, and both
// must be present (ForAllValues alone holds for an absent key).
var pendingPodsCondition = map[string]any{
	"ForAllValues:StringEquals": map[string]any{"events:source": "joiner.forwarder", "events:detail-type": "Pending Pods"},
	"Null":                      map[string]any{"events:source": "false", "events:detail-type": "false"},
}

// The bus admits only the forwarder role.
func TestBusPolicy(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		bus := render(s.resources("AWS::Events::EventBus")[0].Properties).(map[string]any)
		if bus["Name"] != "joiner-"+s.cfg.ClusterName {
			t.Errorf("bus name %v", bus["Name"])
		}
		busArn := "arn:" + partition + ":events:" + region + ":" + account + ":event-bus/joiner-" + s.cfg.ClusterName
		fwd := "${ForwarderRoleD8BAA15A.Arn}"
		want := map[string]any{"Version": "2012-10-17", "Statement": []any{
			map[string]any{"Sid": "ForwarderMayPut", "Effect": "Allow", "Principal": map[string]any{"AWS": fwd}, "Action": "events:PutEvents", "Resource": busArn,
				"Condition": pendingPodsCondition},
			map[string]any{"Sid": "NobodyElseMayPut", "Effect": "Deny", "Principal": map[string]any{"AWS": "*"}, "Action": "events:PutEvents", "Resource": busArn,
				"Condition": map[string]any{"ArnNotEquals": map[string]any{"aws:PrincipalArn": fwd}}},
		}}
		if !reflect.DeepEqual(bus["Policy"], want) {
			t.Errorf("bus policy\n got %s\nwant %s", asJSON(bus["Policy"]), asJSON(want))
		}
	})
}

// Node role like seed 001's: trusted by EC2, the three AWS-managed node policies; or
// the user's role, untouched. No instance profile: the functions create one per
// EC2NodeClass that names the role.
func TestNodeRole(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		if n := len(s.resources("AWS::IAM::InstanceProfile")); n != 0 {
			t.Errorf("the stack creates %d instance profile(s); the functions make them per EC2NodeClass", n)
		}
		if s.cfg.NodeRoleArn != "" {
			for _, r := range s.resources("AWS::IAM::Role") {
				if strings.HasPrefix(r.ID, "NodeRole") {
					t.Errorf("created a node role although %s was given", s.cfg.NodeRoleArn)
				}
			}
			return
		}
		role := render(s.resource(t, "NodeRoleB5643E21").Properties).(map[string]any)
		wantPolicies := []string{"AmazonEC2ContainerRegistryReadOnly", "AmazonSSMManagedInstanceCore"}
		if s.cfg.Kind == KindEKS {
			wantPolicies = append([]string{"AmazonEKSWorkerNodePolicy"}, wantPolicies...)
		}
		var got []string
		for _, arn := range strs(role["ManagedPolicyArns"]) {
			got = append(got, strings.TrimPrefix(arn, "arn:"+partition+":iam::aws:policy/"))
		}
		if !reflect.DeepEqual(got, wantPolicies) || role["RoleName"] != "JoinerNodeRole-"+s.cfg.ClusterName {
			t.Errorf("node role %v policies %v", role["RoleName"], got)
		}
		trust := role["AssumeRolePolicyDocument"].(map[string]any)["Statement"].([]any)
		if len(trust) != 1 || !reflect.DeepEqual(trust[0], map[string]any{"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": map[string]any{"Service": "ec2.amazonaws.com"}}) {
			t.Errorf("node trust %s", asJSON(trust))
		}
		// Nodes of a self-managed cluster read the kubeadm bootstrap token at boot:
		// exactly that parameter, nothing else (Joiner's functions never read it).
		want := []map[string]any{}
		if s.cfg.Kind == KindSelfManaged {
			want = append(want, map[string]any{"Sid": "ReadBootstrapTokenParameter", "Effect": "Allow", "Action": "ssm:GetParameter",
				"Resource": "arn:" + partition + ":ssm:" + region + ":" + account + ":parameter/joiner/" + s.cfg.ClusterName + "/bootstrap-token"})
		}
		if got := s.policyStatements(t, "NodeRoleB5643E21"); !reflect.DeepEqual(append([]map[string]any{}, got...), want) {
			t.Errorf("node role policy %s, want %s", asJSON(got), asJSON(want))
		}
	})
}

func TestAccessEntries(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		entries := map[string]map[string]any{}
		for _, e := range s.resources("AWS::EKS::AccessEntry") {
			p := render(e.Properties).(map[string]any)
			entries[p["Type"].(string)] = p
		}
		if s.cfg.Kind != KindEKS {
			if len(entries) != 0 {
				t.Errorf("access entries on a self-managed cluster: %v", entries)
			}
			return
		}
		want := map[string]any{"ClusterName": s.cfg.ClusterName, "PrincipalArn": "${FunctionsRole5FB35DA3.Arn}", "Type": "STANDARD", "KubernetesGroups": []any{"joiner:functions"}}
		if !reflect.DeepEqual(entries["STANDARD"], want) {
			t.Errorf("functions entry %s", asJSON(entries["STANDARD"]))
		}
		node, ok := entries["EC2_LINUX"]
		if ok != s.cfg.NodeAccessEntry {
			t.Fatalf("node entry present=%v, configured %v", ok, s.cfg.NodeAccessEntry)
		}
		if ok && !reflect.DeepEqual(node, map[string]any{"ClusterName": s.cfg.ClusterName, "PrincipalArn": "${NodeRoleB5643E21.Arn}", "Type": "EC2_LINUX"}) {
			t.Errorf("node entry %s", asJSON(node))
		}
	})
}

// The schedules deliver an envelope events.Decode reads as a SchedulerTick, through a
// role that may invoke only those two functions.
func TestSchedules(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		for id, want := range map[string]struct{ fn, rate, name string }{
			"ProvisionerSweepSchedule": {"Provisioner", s.cfg.ScheduleRate, "provisioner-sweep"},
			"ConsolidatorSchedule":     {"Consolidator", s.cfg.ConsolidationRate, "consolidation"},
		} {
			p := render(s.resource(t, id).Properties).(map[string]any)
			tg := p["Target"].(map[string]any)
			if p["ScheduleExpression"] != "rate("+want.rate+")" || p["State"] != "ENABLED" || tg["Arn"] != "${"+want.fn+".Arn}" ||
				tg["RoleArn"] != "${SchedulerRole59E73443.Arn}" || !strings.HasPrefix(tg["DeadLetterConfig"].(map[string]any)["Arn"].(string), "${DeliveryDLQ") {
				t.Errorf("%s: %s", id, asJSON(p))
			}
			// What Scheduler delivers, with its context attributes and CloudFormation's
			// pseudo parameters filled in.
			input := strings.NewReplacer("<aws.scheduler.execution-id>", "d32c5kddcf5bb8c3", "<aws.scheduler.scheduled-time>", "2024-05-01T12:05:00Z",
				"<aws.scheduler.schedule-arn>", "arn:aws:scheduler:us-east-1:123456789012:schedule/default/x", "<aws.scheduler.attempt-number>", "1",
				account, "123456789012", region, "us-east-1").Replace(tg["Input"].(string))
			ev, err := events.Decode([]byte(input))
			if err != nil {
				t.Fatalf("%s input %s: %v", id, input, err)
			}
			tick, ok := ev.(*events.SchedulerTick)
			if !ok || tick.ID != "d32c5kddcf5bb8c3" || tick.Time.IsZero() || string(tick.Detail.Object) != `{"schedule":"`+want.name+`","attemptNumber":"1"}` {
				t.Errorf("%s decodes to %#v", id, ev)
			}
		}
		var schedID string
		for _, r := range s.resources("AWS::IAM::Role") {
			if strings.HasPrefix(r.ID, "SchedulerRole") {
				schedID = r.ID
			}
		}
		role := render(s.resource(t, schedID).Properties).(map[string]any)
		trust := role["AssumeRolePolicyDocument"].(map[string]any)["Statement"].([]any)
		if len(trust) != 1 || !reflect.DeepEqual(trust[0], map[string]any{"Action": "sts:AssumeRole", "Effect": "Allow",
			"Principal": map[string]any{"Service": "scheduler.amazonaws.com"}, "Condition": map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": account}}}) {
			t.Errorf("scheduler trust %s", asJSON(trust))
		}
		got := bySid(t, s.policyStatements(t, schedID))
		if len(got) != 2 ||
			!reflect.DeepEqual(got["InvokeScheduledFunctions"], map[string]any{"Sid": "InvokeScheduledFunctions", "Effect": "Allow", "Action": "lambda:InvokeFunction",
				"Resource": []any{"${Provisioner.Arn}", "${Consolidator.Arn}"}}) ||
			got["SendUndeliveredToDLQ"]["Action"] != "sqs:SendMessage" || !strings.HasPrefix(got["SendUndeliveredToDLQ"]["Resource"].(string), "${DeliveryDLQ") {
			t.Errorf("scheduler policy %s", asJSON(got))
		}
	})
}

func TestQueuesAlarmsDashboard(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		for _, q := range s.resources("AWS::SQS::Queue") {
			if q.Properties["SqsManagedSseEnabled"] != true || q.Properties["MessageRetentionPeriod"] != float64(14*24*3600) {
				t.Errorf("queue %s: %v", q.ID, q.Properties)
			}
		}
		for _, qp := range s.resources("AWS::SQS::QueuePolicy") {
			doc, _ := json.Marshal(qp.Properties)
			if !strings.Contains(string(doc), `"aws:SecureTransport":"false"`) {
				t.Errorf("queue policy %s does not enforce TLS", qp.ID)
			}
		}
		alarms := map[string]map[string]any{}
		for _, a := range s.resources("AWS::CloudWatch::Alarm") {
			p := render(a.Properties).(map[string]any)
			alarms[a.ID] = p
			if p["Threshold"] != 1.0 || p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" || p["TreatMissingData"] != "notBreaching" {
				t.Errorf("alarm %s: %v", a.ID, p)
			}
			actions := strs(p["AlarmActions"])
			if (s.cfg.AlarmTopicArn != "") != (len(actions) == 1 && actions[0] == s.cfg.AlarmTopicArn) {
				t.Errorf("alarm %s actions %v", a.ID, actions)
			}
		}
		// Only the dead-letter queues' depth: a failed invocation ends in its
		// function's DLQ, so an alarm on function errors would only double the bill.
		var queueAlarms int
		for id, p := range alarms {
			metrics, _ := p["Metrics"].([]any)
			if len(metrics) != 1 {
				t.Errorf("alarm %s: metrics %v", id, p["Metrics"])
				continue
			}
			stat := metrics[0].(map[string]any)["MetricStat"].(map[string]any)
			m := stat["Metric"].(map[string]any)
			dim := m["Dimensions"].([]any)[0].(map[string]any)
			switch {
			case m["MetricName"] == "ApproximateNumberOfMessagesVisible" && m["Namespace"] == "AWS/SQS" && stat["Stat"] == "Maximum" &&
				dim["Name"] == "QueueName" && strings.HasPrefix(dim["Value"].(string), "${"+id[:strings.Index(id, "DepthAlarm")]):
				queueAlarms++
			default:
				t.Errorf("unexpected alarm %s %v", id, p)
			}
		}
		if queueAlarms != 4 {
			t.Errorf("%d queue alarms, want 4", queueAlarms)
		}
		// Joiner's figures are charted from the metrics log lines with Logs
		// Insights: no custom metric is read (each would be billed).
		body, _ := render(s.resources("AWS::CloudWatch::Dashboard")[0].Properties["DashboardBody"]).(string)
		var dash struct {
			Widgets []struct {
				Type       string
				Properties struct{ Query string }
			}
		}
		if err := json.Unmarshal([]byte(body), &dash); err != nil {
			t.Fatalf("dashboard body: %v\n%s", err, body)
		}
		var queries []string
		for _, w := range dash.Widgets {
			switch {
			case w.Type == "log":
				if !strings.Contains(w.Properties.Query, `filter msg = "metrics"`) {
					t.Errorf("log widget does not read the metrics lines: %s", w.Properties.Query)
				}
				queries = append(queries, w.Properties.Query)
			case strings.Contains(body, "SEARCH(") || strings.Contains(body, `"Joiner"`):
				t.Errorf("dashboard reads custom metrics: %s", body)
			}
		}
		for _, m := range []string{MetricPodsPending, MetricNodesLaunched, MetricNodesTerminated, MetricInterruptionsHandled, MetricDecisionMillis, MetricSavingsPerHour} {
			if !strings.Contains(strings.Join(queries, "\n"), "("+m) {
				t.Errorf("no Logs Insights widget charts %s: %v", m, queries)
			}
		}
	})
}

func TestOutputs(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		outs := s.tmpl["Outputs"].(map[string]any)
		for _, o := range []string{"EventBusName", "EventBusArn", "ForwarderRoleArn", "FunctionsRoleArn", "NodeRoleName",
			"ProvisionerFunctionName", "InterruptionFunctionName", "ConsolidatorFunctionName"} {
			if _, ok := outs[o]; !ok {
				t.Errorf("missing output %s", o)
			}
		}
		if got := render(outs["ForwarderRoleArn"].(map[string]any)["Value"]); got != "${ForwarderRoleD8BAA15A.Arn}" {
			t.Errorf("ForwarderRoleArn = %v", got)
		}
	})
}

// cfnLintIgnores are cfn-lint findings ignored on purpose, each with its reason.
var cfnLintIgnores = map[string]string{
	// CDK's Function adds DependsOn on its role (and the role's DefaultPolicy) so that the
	// policy exists before Lambda first runs; the role is also referenced by GetAtt, which
	// makes the DependsOn redundant but harmless. Removing it would fight CDK internals.
	"W3005": "redundant DependsOn on the functions' role, added by CDK's Function",
}

// Every synthesized template passes cfn-lint with no error (and no warning, save the
// ignores above).
func TestCfnLint(t *testing.T) {
	lint, err := exec.LookPath("cfn-lint")
	if err != nil {
		t.Fatal("cfn-lint is not on PATH (it comes with the machine image; pip install cfn-lint elsewhere)")
	}
	forEachVariant(t, func(t *testing.T, s *synthesized) {
		args := []string{"--format", "parseable"}
		for rule := range cfnLintIgnores {
			args = append(args, "--ignore-checks", rule)
		}
		out, err := exec.Command(lint, append(args, "--", s.file)...).CombinedOutput()
		if err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("cfn-lint %s: %v\n%s", filepath.Base(s.file), err, out)
		}
	})
}
