package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseks"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/joiner-autoscaler/joiner/events"
)

// FunctionSpec sizes one Lambda function.
type FunctionSpec struct {
	// Name is the folder under functions/ and dist/, and the construct/logical ID
	// (capitalised) that `sam local invoke` takes.
	Name        string
	Description string
	MemoryMB    float64
	TimeoutSec  float64
	// Async invocation: how long and how often Lambda retries a failed event before it
	// goes to the function's dead-letter queue.
	AsyncMaxAgeSec float64
	AsyncRetries   float64
}

// Functions are Joiner's three functions. Sizes: the provisioner and consolidator load
// the cluster snapshot and run the packer (1024 MB also buys a full vCPU on arm64); the
// interruption function only acts on one instance. Its timeout spans the whole
// two-minute spot warning, because a Lambda retry after a timeout comes too late to
// finish a drain.
var Functions = []FunctionSpec{
	{Name: "provisioner", Description: "Joiner: launches capacity for pending pods (Pending Pods events and a scheduled sweep)",
		MemoryMB: 1024, TimeoutSec: 120, AsyncMaxAgeSec: 300, AsyncRetries: 1},
	{Name: "interruption", Description: "Joiner: replaces and drains nodes on spot interruptions, rebalance recommendations, state changes and AWS Health scheduled changes",
		MemoryMB: 512, TimeoutSec: 120, AsyncMaxAgeSec: 3600, AsyncRetries: 2},
	{Name: "consolidator", Description: "Joiner: removes or replaces empty, underutilised, drifted, expired and leaked capacity",
		MemoryMB: 1024, TimeoutSec: 300, AsyncMaxAgeSec: 60, AsyncRetries: 0},
}

// Retry policies of the EventBridge targets (delivery to Lambda, before Lambda's own
// async retries). A spot warning is worthless after its two minutes, so delivery stops
// trying then; AWS Health announces changes days ahead, so it keeps trying for an hour;
// a Pending Pods batch is superseded by the sweep within minutes.
const (
	ec2RuleMaxAgeSec    = 120
	ec2RuleRetries      = 8
	healthRuleMaxAgeSec = 3600
	healthRuleRetries   = 24
	podsRuleMaxAgeSec   = 300
	podsRuleRetries     = 8
	scheduleMaxAgeSec   = 60 // a tick is replaced by the next one
	scheduleRetries     = 2
	dlqRetentionDays    = 14
	alarmPeriodMinutes  = 5
)

// Stack is the synthesized Joiner stack and the handles tests look at.
type Stack struct {
	awscdk.Stack
	Config        Config
	FunctionsRole awsiam.Role
	ForwarderRole awsiam.Role
	Bus           awsevents.EventBus
	Functions     map[string]awslambda.Function
}

// NewStack builds the Joiner stack from a validated configuration.
func NewStack(scope constructs.Construct, cfg Config, props *awscdk.StackProps) (*Stack, error) {
	if props == nil {
		props = &awscdk.StackProps{}
	}
	if props.Description == nil {
		props.Description = jsii.String(fmt.Sprintf("Joiner serverless node autoscaler for %s cluster %s", cfg.Kind, cfg.ClusterName))
	}
	// Checked before any construct exists, so a missing binary leaves nothing behind.
	assetDirs, err := functionAssetDirs(cfg.DistDir)
	if err != nil {
		return nil, err
	}
	st := awscdk.NewStack(scope, jsii.String(cfg.StackName), props)
	s := &Stack{Stack: st, Config: cfg, Functions: map[string]awslambda.Function{}}
	a := arns{partition: *st.Partition(), region: *st.Region(), account: *st.Account()}
	clusterArn := "arn:" + a.partition + ":eks:" + a.region + ":" + a.account + ":cluster/" + cfg.ClusterName

	// Nodes: the role instances run with.
	var nodeRole awsiam.IRole
	if cfg.NodeRoleArn == "" {
		managed := []awsiam.IManagedPolicy{
			awsiam.ManagedPolicy_FromAwsManagedPolicyName(jsii.String("AmazonEC2ContainerRegistryReadOnly")),
			awsiam.ManagedPolicy_FromAwsManagedPolicyName(jsii.String("AmazonSSMManagedInstanceCore")),
		}
		if cfg.Kind == KindEKS {
			managed = append([]awsiam.IManagedPolicy{awsiam.ManagedPolicy_FromAwsManagedPolicyName(jsii.String("AmazonEKSWorkerNodePolicy"))}, managed...)
		}
		r := awsiam.NewRole(st, jsii.String("NodeRole"), &awsiam.RoleProps{
			RoleName:        jsii.String(cfg.NodeRoleName()),
			Description:     jsii.String("Joiner-launched nodes of cluster " + cfg.ClusterName),
			AssumedBy:       awsiam.NewServicePrincipal(jsii.String("ec2.amazonaws.com"), nil),
			ManagedPolicies: &managed,
		})
		suppress(r, &cdknag.NagPackSuppression{
			Id: jsii.String("AwsSolutions-IAM4"),
			Reason: jsii.String("The node role carries the AWS-managed policies EKS documents for worker nodes (AmazonEKSWorkerNodePolicy, " +
				"AmazonEC2ContainerRegistryReadOnly, AmazonSSMManagedInstanceCore), as Karpenter's node role does; AWS keeps them current with the kubelet's needs."),
		})
		for _, stmt := range nodeTokenStatements(cfg, a) {
			r.AddToPolicy(stmt.cdk())
		}
		nodeRole = r
	} else {
		nodeRole = awsiam.Role_FromRoleArn(st, jsii.String("NodeRole"), jsii.String(cfg.NodeRoleArn), &awsiam.FromRoleArnOptions{Mutable: jsii.Bool(false)})
	}
	// No instance profile: the functions create one per EC2NodeClass that names
	// this role (spec.role), as Karpenter does, tagged so the policy's
	// IAMInstanceProfile* statements cover exactly those.

	// The functions' role.
	fnRole := awsiam.NewRole(st, jsii.String("FunctionsRole"), &awsiam.RoleProps{
		Description: jsii.String("Joiner's Lambda functions for cluster " + cfg.ClusterName),
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
	})
	s.FunctionsRole = fnRole
	var docStatements []awsiam.PolicyStatement
	for _, stmt := range functionStatements(cfg, a, *nodeRole.RoleArn(), clusterArn) {
		docStatements = append(docStatements, stmt.cdk())
	}
	fnPolicy := awsiam.NewPolicy(st, jsii.String("FunctionsPolicy"), &awsiam.PolicyProps{
		Statements: &docStatements,
		Roles:      &[]awsiam.IRole{fnRole},
	})
	suppress(fnPolicy, &cdknag.NagPackSuppression{
		Id: jsii.String("AwsSolutions-IAM5"),
		Reason: jsii.String("Wildcards are bounded: the ec2:Describe* calls and pricing:GetProducts have no resource-level permissions; " +
			"instance, volume and launch-template ARNs are conditioned on the cluster's ownership tag (aws:RequestTag on create, " +
			"aws:ResourceTag on change or delete); AMI, snapshot, subnet, security-group and capacity-reservation ARNs are only " +
			"referenced by RunInstances/CreateFleet, never modified; fleet, network-interface and spot-request ARNs are created only " +
			"with the ownership tag (aws:RequestTag); /aws/service/* are AWS's public SSM parameters (AMI IDs); " +
			"instance-profile/* is read freely but created, tagged, given a role, emptied or deleted only when it carries the cluster's " +
			"tags (Karpenter's AllowScopedInstanceProfile* statements), and only the node role can be passed into one."),
		AppliesTo: &[]interface{}{
			"Resource::*",
			"Resource::arn:<AWS::Partition>:iam::<AWS::AccountId>:instance-profile/*",
			&cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:(<AWS::AccountId>)?:[a-z-]+\/\*$/g`)},
			"Resource::arn:<AWS::Partition>:ssm:<AWS::Region>::parameter/aws/service/*",
		},
	})
	if len(cfg.SubnetIDs) > 0 {
		// Lambda creates and deletes the functions' ENIs with the execution role.
		fnRole.AddManagedPolicy(awsiam.ManagedPolicy_FromAwsManagedPolicyName(jsii.String("service-role/AWSLambdaVPCAccessExecutionRole")))
		suppress(fnRole, &cdknag.NagPackSuppression{
			Id: jsii.String("AwsSolutions-IAM4"),
			Reason: jsii.String("AWSLambdaVPCAccessExecutionRole: Lambda manages the functions' ENIs in the configured subnets with the execution role; " +
				"AWS maintains the exact action list Lambda needs."),
			AppliesTo: &[]interface{}{"Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"},
		})
	}

	// Dead-letter queues.
	queue := func(id string) awssqs.Queue {
		return awssqs.NewQueue(st, jsii.String(id), &awssqs.QueueProps{
			Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
			EnforceSSL:      jsii.Bool(true),
			RetentionPeriod: awscdk.Duration_Days(jsii.Number(dlqRetentionDays)),
		})
	}
	deliveryDLQ := queue("DeliveryDLQ")
	// cdk-nag recognises the functions' DLQs (Lambda DeadLetterConfig) but not a queue
	// used as EventBridge and Scheduler target DLQ.
	suppress(deliveryDLQ, &cdknag.NagPackSuppression{
		Id: jsii.String("AwsSolutions-SQS3"),
		Reason: jsii.String("This queue is the dead-letter queue of the EventBridge rule targets and Scheduler schedules; " +
			"a DLQ of a DLQ would only hide the failures its depth alarm reports."),
	})
	queues := map[string]awssqs.Queue{"DeliveryDLQ": deliveryDLQ}

	// Functions.
	env := map[string]*string{
		EnvClusterAccess: jsii.String(string(cfg.Kind)),
		EnvClusterName:   jsii.String(cfg.ClusterName),
		EnvDryRun:        jsii.String(fmt.Sprint(cfg.DryRun)),
		EnvRebalanceMode: jsii.String(cfg.RebalanceMode),
		EnvMode:          jsii.String(cfg.Mode),
	}
	if cfg.Kind == KindSelfManaged {
		env[EnvSecretArn] = jsii.String(cfg.SecretArn)
	}
	if cfg.ServiceCIDR != "" {
		env[EnvClusterCIDR] = jsii.String(cfg.ServiceCIDR)
	}
	var logGroupArns []string
	logGroupNames := map[string]*string{}
	for _, spec := range Functions {
		id := strings.ToUpper(spec.Name[:1]) + spec.Name[1:]
		lg := awslogs.NewLogGroup(st, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
			Retention:     logRetention[cfg.LogRetentionDays],
			RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
		})
		logGroupArns = append(logGroupArns, *lg.LogGroupArn())
		logGroupNames[spec.Name] = lg.LogGroupName()
		dlq := queue(id + "DLQ")
		queues[id+"DLQ"] = dlq
		fn := awslambda.NewFunction(st, jsii.String(id), &awslambda.FunctionProps{
			Description:           jsii.String(spec.Description),
			Runtime:               awslambda.Runtime_PROVIDED_AL2023(),
			Architecture:          awslambda.Architecture_ARM_64(),
			Handler:               jsii.String("bootstrap"),
			Code:                  awslambda.Code_FromAsset(jsii.String(assetDirs[spec.Name]), nil),
			MemorySize:            jsii.Number(spec.MemoryMB),
			Timeout:               awscdk.Duration_Seconds(jsii.Number(spec.TimeoutSec)),
			Role:                  fnRole,
			Environment:           &env,
			LoggingFormat:         awslambda.LoggingFormat_JSON,
			ApplicationLogLevelV2: awslambda.ApplicationLogLevel(cfg.LogLevel),
			SystemLogLevelV2:      awslambda.SystemLogLevel_WARN,
			LogGroup:              lg,
			DeadLetterQueue:       dlq,
			MaxEventAge:           awscdk.Duration_Seconds(jsii.Number(spec.AsyncMaxAgeSec)),
			RetryAttempts:         jsii.Number(spec.AsyncRetries),
		})
		cfn := fn.Node().DefaultChild().(awslambda.CfnFunction)
		// A stable logical ID is what `sam local invoke -t cdk.out/<stack>.template.json
		// Provisioner` names.
		cfn.OverrideLogicalId(jsii.String(id))
		if len(cfg.SubnetIDs) > 0 {
			cfn.AddPropertyOverride(jsii.String("VpcConfig"), map[string]any{
				"SubnetIds":        cfg.SubnetIDs,
				"SecurityGroupIds": cfg.SecurityGroupIDs,
			})
		}
		s.Functions[spec.Name] = fn
	}
	// LogGroup ARNs end in ":*", which covers the group's streams.
	fnRole.AddToPrincipalPolicy(statement{
		Sid:       "WriteOwnLogs",
		Actions:   []string{"logs:CreateLogStream", "logs:PutLogEvents"},
		Resources: logGroupArns,
	}.cdk())
	provisioner, interruption, consolidator := s.Functions["provisioner"], s.Functions["interruption"], s.Functions["consolidator"]

	// The default bus: interruption sources.
	ec2Rule := awsevents.NewRule(st, jsii.String("InterruptionEC2Rule"), &awsevents.RuleProps{
		Description:  jsii.String("Joiner: EC2 spot interruption warnings, rebalance recommendations and instance state changes"),
		EventPattern: mustEventPattern(events.InterruptionEC2Pattern()),
	})
	ec2Rule.AddTarget(awseventstargets.NewLambdaFunction(interruption, &awseventstargets.LambdaFunctionProps{
		DeadLetterQueue: deliveryDLQ,
		MaxEventAge:     awscdk.Duration_Seconds(jsii.Number(ec2RuleMaxAgeSec)),
		RetryAttempts:   jsii.Number(ec2RuleRetries),
	}))
	healthRule := awsevents.NewRule(st, jsii.String("InterruptionHealthRule"), &awsevents.RuleProps{
		Description:  jsii.String("Joiner: AWS Health scheduled changes for EC2 instances"),
		EventPattern: mustEventPattern(events.InterruptionHealthPattern()),
	})
	healthRule.AddTarget(awseventstargets.NewLambdaFunction(interruption, &awseventstargets.LambdaFunctionProps{
		DeadLetterQueue: deliveryDLQ,
		MaxEventAge:     awscdk.Duration_Seconds(jsii.Number(healthRuleMaxAgeSec)),
		RetryAttempts:   jsii.Number(healthRuleRetries),
	}))

	// Joiner's bus, written only by the forwarder.
	busName := "joiner-" + cfg.ClusterName
	bus := awsevents.NewEventBus(st, jsii.String("Bus"), &awsevents.EventBusProps{
		EventBusName: jsii.String(busName),
		Description:  jsii.String("Joiner: Pending Pods batches from the in-cluster forwarder of " + cfg.ClusterName),
	})
	s.Bus = bus
	fwdRole := forwarderRole(st, cfg, a, clusterArn)
	s.ForwarderRole = fwdRole
	fwdRole.AddToPrincipalPolicy(statement{
		Sid:        "PutPendingPods",
		Actions:    []string{"events:PutEvents"},
		Resources:  []string{*bus.EventBusArn()},
		Conditions: pendingPodsOnly(),
	}.cdk())
	// The bus's resource policy: the forwarder role may put events, and an explicit deny
	// keeps every other principal out even if an identity policy elsewhere in the
	// account allows events:PutEvents on "*". The ARN is spelled out rather than taken
	// from the bus, which would make the bus depend on itself.
	busArn := "arn:" + a.partition + ":events:" + a.region + ":" + a.account + ":event-bus/" + busName
	bus.Node().DefaultChild().(awsevents.CfnEventBus).SetPolicy(map[string]any{
		"Version": "2012-10-17",
		"Statement": []any{
			map[string]any{
				// The same conditions as the role's own statement: in one account an
				// allow here suffices on its own, so without them the forwarder could
				// put any event on the bus whatever its role says.
				"Sid":       "ForwarderMayPut",
				"Effect":    "Allow",
				"Principal": map[string]any{"AWS": *fwdRole.RoleArn()},
				"Action":    "events:PutEvents",
				"Resource":  busArn,
				"Condition": pendingPodsOnly(),
			},
			map[string]any{
				"Sid":       "NobodyElseMayPut",
				"Effect":    "Deny",
				"Principal": map[string]any{"AWS": "*"},
				"Action":    "events:PutEvents",
				"Resource":  busArn,
				"Condition": map[string]any{"ArnNotEquals": map[string]any{"aws:PrincipalArn": *fwdRole.RoleArn()}},
			},
		},
	})
	podsRule := awsevents.NewRule(st, jsii.String("PendingPodsRule"), &awsevents.RuleProps{
		Description:  jsii.String("Joiner: Pending Pods batches to the provisioner"),
		EventBus:     bus,
		EventPattern: mustEventPattern(events.PendingPodsPattern()),
	})
	// The bus by name instead of {"Ref": bus}: the same value in AWS, but moto's
	// CloudFormation (make deploy-local) resolves that Ref to no name and fails the
	// rule, and every resource after it, while reporting the stack created.
	podsRule.Node().DefaultChild().(awsevents.CfnRule).AddPropertyOverride(jsii.String("EventBusName"), jsii.String(busName))
	podsRule.Node().AddDependency(bus)
	podsRule.AddTarget(awseventstargets.NewLambdaFunction(provisioner, &awseventstargets.LambdaFunctionProps{
		DeadLetterQueue: deliveryDLQ,
		MaxEventAge:     awscdk.Duration_Seconds(jsii.Number(podsRuleMaxAgeSec)),
		RetryAttempts:   jsii.Number(podsRuleRetries),
	}))

	// The recording tap: the same events, also to a queue `joiner record --queue`
	// reads. Schedules are not tapped: a replay runs its own.
	if cfg.RecordQueue {
		recordQ := queue("RecordQueue")
		suppress(recordQ, &cdknag.NagPackSuppression{
			Id: jsii.String("AwsSolutions-SQS3"),
			Reason: jsii.String("The record queue is a copy of the functions' events for joiner record; a message it fails to take " +
				"changes no decision, and a dead-letter queue would only keep a second copy."),
		})
		for _, r := range []awsevents.Rule{ec2Rule, healthRule, podsRule} {
			r.AddTarget(awseventstargets.NewSqsQueue(recordQ, nil))
		}
		awscdk.NewCfnOutput(st, jsii.String("RecordQueueUrl"), &awscdk.CfnOutputProps{
			Description: jsii.String("Queue of the functions' events: joiner record --queue"), Value: recordQ.QueueUrl()})
	}

	// Schedules: the provisioner's sweep and the consolidator.
	schedRole := awsiam.NewRole(st, jsii.String("SchedulerRole"), &awsiam.RoleProps{
		Description: jsii.String("EventBridge Scheduler invoking Joiner's provisioner sweep and consolidator"),
		AssumedBy: awsiam.NewPrincipalWithConditions(awsiam.NewServicePrincipal(jsii.String("scheduler.amazonaws.com"), nil),
			&map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": a.account}}),
	})
	schedRole.AddToPrincipalPolicy(statement{
		Sid:       "InvokeScheduledFunctions",
		Actions:   []string{"lambda:InvokeFunction"},
		Resources: []string{*provisioner.FunctionArn(), *consolidator.FunctionArn()},
	}.cdk())
	schedRole.AddToPrincipalPolicy(statement{
		Sid:       "SendUndeliveredToDLQ",
		Actions:   []string{"sqs:SendMessage"},
		Resources: []string{*deliveryDLQ.QueueArn()},
	}.cdk())
	schedule := func(id, name, rate string, fn awslambda.Function) {
		awsscheduler.NewCfnSchedule(st, jsii.String(id), &awsscheduler.CfnScheduleProps{
			Description:        jsii.String("Joiner " + name + " for cluster " + cfg.ClusterName),
			ScheduleExpression: jsii.String("rate(" + rate + ")"),
			State:              jsii.String("ENABLED"),
			FlexibleTimeWindow: &awsscheduler.CfnSchedule_FlexibleTimeWindowProperty{Mode: jsii.String("OFF")},
			Target: &awsscheduler.CfnSchedule_TargetProperty{
				Arn:              fn.FunctionArn(),
				RoleArn:          schedRole.RoleArn(),
				Input:            jsii.String(scheduleInput(name, a)),
				RetryPolicy:      &awsscheduler.CfnSchedule_RetryPolicyProperty{MaximumEventAgeInSeconds: jsii.Number(scheduleMaxAgeSec), MaximumRetryAttempts: jsii.Number(scheduleRetries)},
				DeadLetterConfig: &awsscheduler.CfnSchedule_DeadLetterConfigProperty{Arn: deliveryDLQ.QueueArn()},
			},
		})
	}
	schedule("ProvisionerSweepSchedule", "provisioner-sweep", cfg.ScheduleRate, provisioner)
	schedule("ConsolidatorSchedule", "consolidation", cfg.ConsolidationRate, consolidator)

	// EKS access: the functions' role as a member of Joiner's Kubernetes group, the node
	// role as nodes.
	if cfg.Kind == KindEKS {
		awseks.NewCfnAccessEntry(st, jsii.String("FunctionsAccessEntry"), &awseks.CfnAccessEntryProps{
			ClusterName:      jsii.String(cfg.ClusterName),
			PrincipalArn:     fnRole.RoleArn(),
			Type:             jsii.String("STANDARD"),
			KubernetesGroups: jsii.Strings(FunctionsGroup),
		})
		if cfg.NodeAccessEntry {
			awseks.NewCfnAccessEntry(st, jsii.String("NodeAccessEntry"), &awseks.CfnAccessEntryProps{
				ClusterName:  jsii.String(cfg.ClusterName),
				PrincipalArn: nodeRole.RoleArn(),
				Type:         jsii.String("EC2_LINUX"),
			})
		}
		if cfg.ForwarderAuth == AuthPodIdentity {
			awseks.NewCfnPodIdentityAssociation(st, jsii.String("ForwarderPodIdentity"), &awseks.CfnPodIdentityAssociationProps{
				ClusterName:    jsii.String(cfg.ClusterName),
				Namespace:      jsii.String(cfg.ForwarderNamespace),
				ServiceAccount: jsii.String(cfg.ForwarderServiceAccount),
				RoleArn:        fwdRole.RoleArn(),
			})
		}
	}

	// Alarms and the dashboard.
	var alarmAction awscloudwatch.IAlarmAction
	if cfg.AlarmTopicArn != "" {
		alarmAction = awscloudwatchactions.NewSnsAction(awssns.Topic_FromTopicArn(st, jsii.String("AlarmTopic"), jsii.String(cfg.AlarmTopicArn)))
	}
	period := awscdk.Duration_Minutes(jsii.Number(alarmPeriodMinutes))
	alarm := func(id, desc string, metric awscloudwatch.IMetric) awscloudwatch.Alarm {
		al := awscloudwatch.NewAlarm(st, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmDescription:   jsii.String(desc),
			Metric:             metric,
			Threshold:          jsii.Number(1),
			EvaluationPeriods:  jsii.Number(1),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		if alarmAction != nil {
			al.AddAlarmAction(alarmAction)
		}
		return al
	}
	queueIDs := make([]string, 0, len(queues))
	for id := range queues {
		queueIDs = append(queueIDs, id)
	}
	sort.Strings(queueIDs)
	var dlqMetrics []awscloudwatch.IMetric
	for _, id := range queueIDs {
		m := queues[id].MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: period, Statistic: jsii.String("Maximum"), Label: jsii.String(id)})
		alarm(id+"DepthAlarm", "Joiner "+cfg.ClusterName+": messages in "+id+" (events that were never handled; inspect and redrive)", m)
		dlqMetrics = append(dlqMetrics, m)
	}
	// No alarm on function errors: a failed invocation is retried and then lands in
	// its function's dead-letter queue, whose depth alarm fires; each alarm is
	// $0.10 a month of the control plane's bill (shared/replay/bill.go).
	var errMetrics, durMetrics []awscloudwatch.IMetric
	for _, spec := range Functions {
		fn := s.Functions[spec.Name]
		errMetrics = append(errMetrics, fn.MetricErrors(&awscloudwatch.MetricOptions{Period: period, Statistic: jsii.String("Sum"), Label: jsii.String(spec.Name)}))
		durMetrics = append(durMetrics, fn.MetricDuration(&awscloudwatch.MetricOptions{Period: period, Statistic: jsii.String("p99"), Label: jsii.String(spec.Name)}))
	}
	graph := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: &metrics, Width: jsii.Number(8), Height: jsii.Number(6)})
	}
	// Joiner's own figures are fields of each invocation's "metrics" log line, not
	// custom metrics ($0.30 a month each): the dashboard charts them with Logs
	// Insights, which costs only while it is viewed.
	insights := func(title string, functions []string, stats string) awscloudwatch.IWidget {
		groups := make([]*string, 0, len(functions))
		for _, f := range functions {
			groups = append(groups, logGroupNames[f])
		}
		return awscloudwatch.NewLogQueryWidget(&awscloudwatch.LogQueryWidgetProps{
			Title:         jsii.String(title),
			LogGroupNames: &groups,
			QueryString:   jsii.String(MetricsQuery(stats)),
			View:          awscloudwatch.LogQueryVisualizationType_LINE,
			Width:         jsii.Number(8), Height: jsii.Number(6),
		})
	}
	all := []string{"provisioner", "interruption", "consolidator"}
	awscloudwatch.NewDashboard(st, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String("Joiner-" + strings.ReplaceAll(cfg.ClusterName, "_", "-")),
		Widgets: &[]*[]awscloudwatch.IWidget{
			{
				insights("Pending pods", []string{"provisioner"}, "max("+MetricPodsPending+") as "+MetricPodsPending),
				insights("Nodes launched / terminated", all, "sum("+MetricNodesLaunched+") as "+MetricNodesLaunched+", sum("+MetricNodesTerminated+") as "+MetricNodesTerminated),
				insights("Interruptions handled", []string{"interruption"}, "sum("+MetricInterruptionsHandled+") as "+MetricInterruptionsHandled),
			},
			{
				insights("Decision time (ms, p99)", all, "pct("+MetricDecisionMillis+", 99) as "+MetricDecisionMillis+"_p99"),
				insights("Savings per hour (USD)", []string{"consolidator"}, "max("+MetricSavingsPerHour+") as "+MetricSavingsPerHour),
				graph("Function errors", errMetrics...),
			},
			{
				graph("Function duration (p99)", durMetrics...),
				graph("Dead-letter queue depth", dlqMetrics...),
			},
		},
	})

	// Outputs for deploy/ and the README.
	out := func(id, desc string, value *string) {
		awscdk.NewCfnOutput(st, jsii.String(id), &awscdk.CfnOutputProps{Description: jsii.String(desc), Value: value})
	}
	// The name as a literal for the same reason as the rule's EventBusName above.
	out("EventBusName", "Joiner's event bus: the forwarder's --event-bus", jsii.String(busName))
	out("EventBusArn", "Joiner's event bus ARN", bus.EventBusArn())
	out("ForwarderRoleArn", "Role for the forwarder's ServiceAccount (eks.amazonaws.com/role-arn annotation with IRSA)", fwdRole.RoleArn())
	out("FunctionsRoleArn", "Role of the functions (mapped to the Kubernetes group "+FunctionsGroup+" on EKS)", fnRole.RoleArn())
	out("NodeRoleName", "Node role: EC2NodeClass spec.role", jsii.String(cfg.NodeRoleName()))
	for _, spec := range Functions {
		id := strings.ToUpper(spec.Name[:1]) + spec.Name[1:]
		out(id+"FunctionName", "The "+spec.Name+" function", s.Functions[spec.Name].FunctionName())
	}
	return s, nil
}

// pendingPodsOnly conditions a PutEvents grant on the forwarder's events only.
// events:source and events:detail-type are multivalued condition keys (one value
// per entry of the request), so the test is ForAllValues:StringEquals — every
// entry must be a Pending Pods batch from the forwarder — and, because ForAllValues
// also holds when a key is absent, Null=false requires them to be present. (A plain
// StringEquals on a multivalued key is what IAM's policy validation flags, and what
// the evaluator moto's enforcement runs refused in functions/deploytest.)
func pendingPodsOnly() map[string]map[string]any {
	return map[string]map[string]any{
		"ForAllValues:StringEquals": {"events:source": events.SourceForwarder, "events:detail-type": events.DetailTypePendingPods},
		"Null":                      {"events:source": "false", "events:detail-type": "false"},
	}
}

// forwarderRole is the role the in-cluster forwarder assumes: through the cluster's
// OIDC provider (IRSA) bound to one service account, or through EKS Pod Identity.
func forwarderRole(st awscdk.Stack, cfg Config, a arns, clusterArn string) awsiam.Role {
	var principal awsiam.IPrincipal
	switch cfg.ForwarderAuth {
	case AuthIRSA:
		principal = awsiam.NewWebIdentityPrincipal(jsii.String(cfg.OIDCProviderArn), &map[string]any{
			"StringEquals": map[string]any{
				cfg.OIDCIssuer + ":sub": "system:serviceaccount:" + cfg.ForwarderNamespace + ":" + cfg.ForwarderServiceAccount,
				cfg.OIDCIssuer + ":aud": "sts.amazonaws.com",
			},
		})
	case AuthPodIdentity:
		principal = awsiam.NewSessionTagsPrincipal(awsiam.NewPrincipalWithConditions(
			awsiam.NewServicePrincipal(jsii.String("pods.eks.amazonaws.com"), nil),
			&map[string]any{
				"StringEquals": map[string]any{
					"aws:SourceAccount":                         a.account,
					"aws:RequestTag/eks-cluster-name":           cfg.ClusterName,
					"aws:RequestTag/kubernetes-namespace":       cfg.ForwarderNamespace,
					"aws:RequestTag/kubernetes-service-account": cfg.ForwarderServiceAccount,
				},
			}))
	}
	return awsiam.NewRole(st, jsii.String("ForwarderRole"), &awsiam.RoleProps{
		Description: jsii.String("Joiner's in-cluster forwarder (" + cfg.ForwarderNamespace + "/" + cfg.ForwarderServiceAccount + "): PutEvents to Joiner's bus only"),
		AssumedBy:   principal,
	})
}

// scheduleInput is the payload a schedule delivers: the same envelope EventBridge
// Scheduler sends without an Input (source aws.scheduler, detail-type "Scheduled
// Event"), so events.Decode reads it as a SchedulerTick, but with the execution id as
// the event id (an idempotency key) and the scheduled time, from Scheduler's context
// attributes. Setting it explicitly also keeps the functions independent of the
// undocumented default payload.
func scheduleInput(name string, a arns) string {
	// Not json.Marshal: the account and region are CloudFormation tokens that CDK
	// resolves inside this string; they hold no characters JSON must escape.
	return `{"version":"0","id":"<aws.scheduler.execution-id>","detail-type":"` + events.DetailTypeScheduled +
		`","source":"` + events.SourceScheduler + `","account":"` + a.account + `","time":"<aws.scheduler.scheduled-time>","region":"` +
		a.region + `","resources":["<aws.scheduler.schedule-arn>"],"detail":{"schedule":"` + name +
		`","attemptNumber":"<aws.scheduler.attempt-number>"}}`
}

// mustEventPattern converts an events.Pattern into CDK's EventPattern. The patterns are
// fixed values in events/, so a conversion failure is a programming error.
func mustEventPattern(p events.Pattern) *awsevents.EventPattern {
	ep, err := eventPattern(p)
	if err != nil {
		panic(err)
	}
	return ep
}

// eventPattern maps the top-level fields CDK models; "detail" passes through as
// generic JSON. Top-level fields must be exact strings (CDK types them as string lists).
func eventPattern(p events.Pattern) (*awsevents.EventPattern, error) {
	m, err := p.Map()
	if err != nil {
		return nil, err
	}
	ep := &awsevents.EventPattern{}
	for key, v := range m {
		if key == "detail" {
			d, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("pattern detail is %T", v)
			}
			ep.Detail = &d
			continue
		}
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("pattern field %q: nested patterns are supported only under detail", key)
		}
		strs := make([]string, len(list))
		for i, x := range list {
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("pattern field %q: only exact strings are supported at the top level, got %v", key, x)
			}
			strs[i] = s
		}
		vals := jsii.Strings(strs...)
		switch key {
		case "source":
			ep.Source = vals
		case "detail-type":
			ep.DetailType = vals
		case "account":
			ep.Account = vals
		case "region":
			ep.Region = vals
		case "resources":
			ep.Resources = vals
		case "version":
			ep.Version = vals
		case "id":
			ep.Id = vals
		default:
			return nil, fmt.Errorf("pattern field %q is not an EventBridge envelope field", key)
		}
	}
	return ep, nil
}

// functionAssetDirs finds dist/<name>/bootstrap for every function: real binaries from
// `make functions`. A missing one is an error naming the fix, never a placeholder.
func functionAssetDirs(distDir string) (map[string]string, error) {
	abs, err := filepath.Abs(distDir)
	if err != nil {
		return nil, err
	}
	dirs := map[string]string{}
	var missing []string
	for _, spec := range Functions {
		dir := filepath.Join(abs, spec.Name)
		fi, err := os.Stat(filepath.Join(dir, "bootstrap"))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			missing = append(missing, filepath.Join(dir, "bootstrap"))
			continue
		}
		dirs[spec.Name] = dir
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("function binaries missing or not executable: %s; build them with `make functions` (linux/arm64, -tags lambda.norpc), or point -c %s at a folder holding <function>/bootstrap",
			strings.Join(missing, ", "), CtxDistDir)
	}
	return dirs, nil
}

// suppress records a cdk-nag suppression, with its reason, on the construct's
// CloudFormation resource alone (not its children), so every suppression is traceable
// to one finding in the nag report.
func suppress(c constructs.IConstruct, s *cdknag.NagPackSuppression) {
	cdknag.NagSuppressions_AddResourceSuppressions(c.Node().DefaultChild(), &[]*cdknag.NagPackSuppression{s}, jsii.Bool(false))
}
