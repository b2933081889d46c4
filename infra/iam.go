package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
)

// statement is an IAM statement as plain data, so the policy is readable in one place
// and convertible to CDK.
type statement struct {
	Sid        string
	Actions    []string
	Resources  []string
	Conditions map[string]map[string]any
}

func (s statement) cdk() awsiam.PolicyStatement {
	props := &awsiam.PolicyStatementProps{
		Sid:       jsii.String(s.Sid),
		Effect:    awsiam.Effect_ALLOW,
		Actions:   jsii.Strings(s.Actions...),
		Resources: jsii.Strings(s.Resources...),
	}
	if len(s.Conditions) > 0 {
		cond := map[string]any{}
		for op, kv := range s.Conditions {
			cond[op] = kv
		}
		props.Conditions = &cond
	}
	return awsiam.NewPolicyStatement(props)
}

// arns builds ARNs for the stack's partition, region and account (CloudFormation
// pseudo parameters, resolved at deploy time).
type arns struct{ partition, region, account string }

func (a arns) ec2(resource string) string {
	return "arn:" + a.partition + ":ec2:" + a.region + ":" + a.account + ":" + resource
}

// ec2Public is for resources other accounts may own (public AMIs, their snapshots).
func (a arns) ec2Public(resource string) string {
	return "arn:" + a.partition + ":ec2:" + a.region + "::" + resource
}

// ec2Describe are the read-only EC2 calls Joiner makes: instances and their types,
// offerings, prices, AMIs, subnets, security groups, launch templates. Listed one by
// one rather than ec2:Describe* so that the policy grants what is used.
var ec2Describe = []string{
	"ec2:DescribeAvailabilityZones",
	"ec2:DescribeCapacityReservations",
	"ec2:DescribeImages",
	"ec2:DescribeInstances",
	"ec2:DescribeInstanceTypeOfferings",
	"ec2:DescribeInstanceTypes",
	"ec2:DescribeLaunchTemplateVersions",
	"ec2:DescribeLaunchTemplates",
	"ec2:DescribeSecurityGroups",
	"ec2:DescribeSpotPriceHistory",
	"ec2:DescribeSubnets",
}

// functionStatements is the functions' whole EC2/IAM/SSM/EKS/Secrets policy (log and
// DLQ permissions are added next to their resources). Every mutating EC2 action either
// requires the cluster's ownership tag (aws:RequestTag when creating, aws:ResourceTag
// when changing or deleting) or is limited to resource types it only reads (AMIs,
// subnets, security groups referenced by RunInstances/CreateFleet).
func functionStatements(cfg Config, a arns, nodeRoleArn, clusterArn string) []statement {
	owned := OwnershipTagKey(cfg.ClusterName)
	// What shared/cloud tags when it launches (TagSpecifications): the instance, its
	// volumes, the fleet, the network interface and the spot request (the last two
	// through the launch template), and its launch templates.
	byproducts := []string{a.ec2("fleet/*"), a.ec2("network-interface/*"), a.ec2("spot-instances-request/*")}
	tagged := append([]string{a.ec2("instance/*"), a.ec2("volume/*"), a.ec2("launch-template/*")}, byproducts...)
	st := []statement{
		{
			Sid:       "EC2Read",
			Actions:   ec2Describe,
			Resources: []string{"*"},
		},
		{
			// RunInstances/CreateFleet also authorize against the AMI, its snapshots,
			// the subnet, the security groups and any capacity reservation. These are
			// not modified, and AMIs are often another account's, so they cannot carry
			// Joiner's tag; the created resources below must.
			Sid:     "EC2LaunchUsingReadOnlyResources",
			Actions: []string{"ec2:RunInstances", "ec2:CreateFleet"},
			Resources: []string{
				a.ec2Public("image/*"), a.ec2Public("snapshot/*"), a.ec2("subnet/*"),
				a.ec2("security-group/*"), a.ec2("capacity-reservation/*"),
			},
		},
		{
			Sid:       "EC2LaunchFromOwnedLaunchTemplates",
			Actions:   []string{"ec2:RunInstances", "ec2:CreateFleet"},
			Resources: []string{a.ec2("launch-template/*")},
			Conditions: map[string]map[string]any{
				"StringEquals": {"aws:ResourceTag/" + owned: "owned"},
			},
		},
		{
			// The safety rule's guarantee: no instance (or volume) can be created
			// without the cluster's ownership tag in the same request.
			Sid:       "EC2CreateOwnedInstances",
			Actions:   []string{"ec2:RunInstances", "ec2:CreateFleet"},
			Resources: []string{a.ec2("instance/*"), a.ec2("volume/*")},
			Conditions: map[string]map[string]any{
				"StringEquals": {"aws:RequestTag/" + owned: "owned"},
			},
		},
		{
			// Created alongside an instance in the same call and tagged at creation
			// (the fleet by CreateFleet, the network interface and spot request by the
			// launch template), so they too need the ownership tag, as in Karpenter's
			// reference policy.
			Sid:       "EC2LaunchByproducts",
			Actions:   []string{"ec2:RunInstances", "ec2:CreateFleet"},
			Resources: byproducts,
			Conditions: map[string]map[string]any{
				"StringEquals": {"aws:RequestTag/" + owned: "owned"},
			},
		},
		{
			Sid:       "EC2CreateOwnedLaunchTemplates",
			Actions:   []string{"ec2:CreateLaunchTemplate"},
			Resources: []string{a.ec2("launch-template/*")},
			Conditions: map[string]map[string]any{
				"StringEquals": {"aws:RequestTag/" + owned: "owned"},
			},
		},
		{
			Sid:       "EC2TagOwnedResourcesOnCreate",
			Actions:   []string{"ec2:CreateTags"},
			Resources: tagged,
			Conditions: map[string]map[string]any{
				"StringEquals": {
					"aws:RequestTag/" + owned: "owned",
					"ec2:CreateAction":        []string{"RunInstances", "CreateFleet", "CreateLaunchTemplate"},
				},
			},
		},
		{
			// Re-tagging after a launch (shared/cloud confirms an instance carries its
			// tags and re-applies them) only on instances that already carry both
			// ownership tags, and never changing the ownership value: the ownership tag
			// cannot be written onto anything Joiner did not launch.
			Sid:       "EC2TagOwnedInstances",
			Actions:   []string{"ec2:CreateTags"},
			Resources: []string{a.ec2("instance/*")},
			Conditions: map[string]map[string]any{
				"StringEquals":         {"aws:ResourceTag/" + owned: "owned"},
				"StringLike":           {"aws:ResourceTag/" + NodePoolTagKey: "*"},
				"StringEqualsIfExists": {"aws:RequestTag/" + owned: "owned"},
			},
		},
		{
			Sid:       "EC2TerminateOwnedInstances",
			Actions:   []string{"ec2:TerminateInstances"},
			Resources: []string{a.ec2("instance/*")},
			Conditions: map[string]map[string]any{
				"StringEquals": {"aws:ResourceTag/" + owned: "owned"},
				"StringLike":   {"aws:ResourceTag/" + NodePoolTagKey: "*"},
			},
		},
		{
			Sid:       "EC2DeleteOwnedLaunchTemplates",
			Actions:   []string{"ec2:DeleteLaunchTemplate"},
			Resources: []string{a.ec2("launch-template/*")},
			Conditions: map[string]map[string]any{
				"StringEquals": {"aws:ResourceTag/" + owned: "owned"},
			},
		},
		{
			Sid:       "PassNodeRoleToEC2",
			Actions:   []string{"iam:PassRole"},
			Resources: []string{nodeRoleArn},
			Conditions: map[string]map[string]any{
				"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"},
			},
		},
	}
	st = append(st, instanceProfileStatements(cfg, a)...)
	st = append(st, []statement{
		{
			Sid:       "SSMReadPublicParameters",
			Actions:   []string{"ssm:GetParameter"},
			Resources: []string{"arn:" + a.partition + ":ssm:" + a.region + "::parameter/aws/service/*"},
		},
		{
			Sid:       "PricingRead",
			Actions:   []string{"pricing:GetProducts"},
			Resources: []string{"*"},
		},
	}...)
	if cfg.Mode == "shadow" {
		// Shadow mode's memory between rounds (what a round would have written that
		// the next needs): this one parameter, and only while the functions shadow.
		st = append(st, statement{
			Sid:       "ShadowMemoryParameter",
			Actions:   []string{"ssm:GetParameter", "ssm:PutParameter"},
			Resources: []string{"arn:" + a.partition + ":ssm:" + a.region + ":" + a.account + ":parameter" + ShadowMemoryParameter(cfg.ClusterName)},
		})
	}
	switch cfg.Kind {
	case KindEKS:
		st = append(st, statement{
			Sid:       "EKSDescribeCluster",
			Actions:   []string{"eks:DescribeCluster"},
			Resources: []string{clusterArn},
		})
	case KindSelfManaged:
		st = append(st, statement{
			Sid:       "ReadClusterSecret",
			Actions:   []string{"secretsmanager:GetSecretValue"},
			Resources: []string{cfg.SecretArn},
		})
	}
	return st
}

// instanceProfileStatements let the functions manage the instance profile of
// each EC2NodeClass that names a role (shared/cloud InstanceProfile), as
// Karpenter's reference policy does (AllowScopedInstanceProfile*): a profile
// can only be created carrying the cluster's identity tags, and only profiles
// carrying them can be tagged, given a role, emptied or deleted. Reading is
// unconditioned (a missing profile must be told from a forbidden one). The
// role a profile may hold is limited by PassNodeRoleToEC2: AddRoleToInstanceProfile
// passes the role, so only the node role can be put in a profile.
func instanceProfileStatements(cfg Config, a arns) []statement {
	owned := OwnershipTagKey(cfg.ClusterName)
	profiles := []string{"arn:" + a.partition + ":iam::" + a.account + ":instance-profile/*"}
	requestTags := map[string]string{
		"aws:RequestTag/" + owned:                      "owned",
		"aws:RequestTag/eks:eks-cluster-name":          cfg.ClusterName,
		"aws:RequestTag/topology.kubernetes.io/region": a.region,
	}
	resourceTags := map[string]string{
		"aws:ResourceTag/" + owned:                      "owned",
		"aws:ResourceTag/topology.kubernetes.io/region": a.region,
	}
	anyOf := func(ms ...map[string]string) map[string]any {
		out := map[string]any{}
		for _, m := range ms {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	return []statement{
		{
			Sid:       "IAMReadInstanceProfiles",
			Actions:   []string{"iam:GetInstanceProfile"},
			Resources: profiles,
		},
		{
			// The consolidator lists profiles once per container to find those of
			// classes deleted while it did not run. IAM evaluates
			// ListInstanceProfiles against "*", not a profile ARN, so a grant on
			// instance-profile/* denies it: a statement of its own, as Karpenter's
			// reference policy AllowUnscopedInstanceProfileListAction.
			Sid:       "IAMListInstanceProfiles",
			Actions:   []string{"iam:ListInstanceProfiles"},
			Resources: []string{"*"},
		},
		{
			Sid:       "IAMCreateTaggedInstanceProfiles",
			Actions:   []string{"iam:CreateInstanceProfile"},
			Resources: profiles,
			Conditions: map[string]map[string]any{
				"StringEquals": anyOf(requestTags),
				"StringLike":   {"aws:RequestTag/" + NodeClassTagKey: "*"},
			},
		},
		{
			// Creating a profile with tags is also a TagInstanceProfile; a profile
			// that already carries the tags may get the class's own tags.
			Sid:       "IAMTagOwnedInstanceProfiles",
			Actions:   []string{"iam:TagInstanceProfile"},
			Resources: profiles,
			Conditions: map[string]map[string]any{
				"StringEquals": anyOf(requestTags, resourceTags),
				"StringLike":   {"aws:RequestTag/" + NodeClassTagKey: "*", "aws:ResourceTag/" + NodeClassTagKey: "*"},
			},
		},
		{
			Sid:       "IAMManageOwnedInstanceProfiles",
			Actions:   []string{"iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"},
			Resources: profiles,
			Conditions: map[string]map[string]any{
				"StringEquals": anyOf(resourceTags),
				"StringLike":   {"aws:ResourceTag/" + NodeClassTagKey: "*"},
			},
		},
	}
}

// nodeTokenStatements let nodes read the kubeadm bootstrap token at boot: exactly
// the configured SSM parameter or Secrets Manager secret, nothing else. Joiner's
// functions never read it (it would end up in launch templates).
func nodeTokenStatements(cfg Config, a arns) []statement {
	switch {
	case cfg.BootstrapTokenSecretArn != "":
		return []statement{{Sid: "ReadBootstrapTokenSecret", Actions: []string{"secretsmanager:GetSecretValue"}, Resources: []string{cfg.BootstrapTokenSecretArn}}}
	case cfg.BootstrapTokenParameter != "":
		return []statement{{Sid: "ReadBootstrapTokenParameter", Actions: []string{"ssm:GetParameter"},
			Resources: []string{"arn:" + a.partition + ":ssm:" + a.region + ":" + a.account + ":parameter" + cfg.BootstrapTokenParameter}}}
	}
	return nil
}
