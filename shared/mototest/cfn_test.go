package mototest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// heldRoleStack is a stack with a role (the node role's place) and a queue (the rest
// of the stack, which a failed deletion still removes).
const heldRoleStack = `{"Resources":{
 "NodeRole":{"Type":"AWS::IAM::Role","Properties":{"RoleName":"held-node-role",
  "AssumeRolePolicyDocument":{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}}},
 "Queue":{"Type":"AWS::SQS::Queue","Properties":{"QueueName":"held-role-stack-queue"}}}}`

// TestStackDeletionStopsAtAHeldRole: as on AWS, IAM refuses DeleteRole with
// DeleteConflict (HTTP 409) while an instance profile holds the role, a stack
// deletion stops there in DELETE_FAILED (the rest deleted, the role and the profile
// left as they were), and the same DeleteStack succeeds once the profile is gone:
// `cdk destroy` before `joiner cleanup`, then the documented order.
func TestStackDeletionStopsAtAHeldRole(t *testing.T) {
	s, _ := startWithIAM(t)
	ctx := context.Background()
	cfg := AWSConfig(s.URL)
	cf, ic, qc := cloudformation.NewFromConfig(cfg), iam.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	const stack = "held-role"
	if _, err := cf.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String(stack), TemplateBody: aws.String(heldRoleStack),
		Capabilities: []cfntypes.Capability{cfntypes.CapabilityCapabilityNamedIam}}); err != nil {
		t.Fatal(err)
	}
	// What Joiner does for an EC2NodeClass naming the node role.
	if _, err := ic.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("cluster_1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := ic.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("cluster_1"), RoleName: aws.String("held-node-role")}); err != nil {
		t.Fatal(err)
	}

	_, err := ic.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String("held-node-role")})
	var re *awshttp.ResponseError
	if errorCode(err) != "DeleteConflict" || !errors.As(err, &re) || re.HTTPStatusCode() != 409 ||
		!strings.Contains(err.Error(), "Cannot delete entity, must remove roles from instance profile first.") {
		t.Errorf("DeleteRole of a role a profile holds: %v, want DeleteConflict, HTTP 409", err)
	}

	if _, err := cf.DeleteStack(ctx, &cloudformation.DeleteStackInput{StackName: aws.String(stack)}); err != nil {
		t.Fatalf("DeleteStack is accepted (the failure is the stack's status): %v", err)
	}
	out, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(stack)})
	if err != nil {
		t.Fatalf("a stack whose deletion failed is still there: %v", err)
	}
	st := out.Stacks[0]
	if st.StackStatus != cfntypes.StackStatusDeleteFailed || !strings.Contains(aws.ToString(st.StackStatusReason), "[NodeRole]") {
		t.Errorf("stack after the deletion stopped: %s %q, want DELETE_FAILED naming NodeRole", st.StackStatus, aws.ToString(st.StackStatusReason))
	}
	events, err := cf.DescribeStackEvents(ctx, &cloudformation.DescribeStackEventsInput{StackName: aws.String(stack)})
	if err != nil {
		t.Fatal(err)
	}
	var failed string
	for _, e := range events.StackEvents {
		if aws.ToString(e.LogicalResourceId) == "NodeRole" && e.ResourceStatus == cfntypes.ResourceStatusDeleteFailed {
			failed = aws.ToString(e.ResourceStatusReason)
		}
	}
	if !strings.Contains(failed, "must remove roles from instance profile first") || !strings.Contains(failed, "409") {
		t.Errorf("NodeRole's DELETE_FAILED event: %q, want IAM's DeleteConflict", failed)
	}
	if q, err := qc.ListQueues(ctx, &sqs.ListQueuesInput{}); err != nil || len(q.QueueUrls) != 0 {
		t.Errorf("queues after the failed deletion: %v %v, want the stack's queue deleted", q, err)
	}
	ip, err := ic.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("cluster_1")})
	if err != nil || len(ip.InstanceProfile.Roles) != 1 {
		t.Errorf("the profile after the failed deletion: %v %v, want it still holding the role", ip, err)
	}

	// joiner cleanup, then cdk destroy again.
	if _, err := ic.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String("cluster_1"), RoleName: aws.String("held-node-role")}); err != nil {
		t.Fatal(err)
	}
	if _, err := ic.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String("cluster_1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := cf.DeleteStack(ctx, &cloudformation.DeleteStackInput{StackName: aws.String(stack)}); err != nil {
		t.Fatal(err)
	}
	if _, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(stack)}); err == nil {
		t.Error("the stack is still listed after its deletion was retried")
	}
	if _, err := ic.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("held-node-role")}); errorCode(err) != "NoSuchEntity" {
		t.Errorf("the node role after the retried deletion: %v, want NoSuchEntity", err)
	}
	byID, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: st.StackId})
	if err != nil || byID.Stacks[0].StackStatus != cfntypes.StackStatusDeleteComplete {
		t.Errorf("the stack by its ID: %v %v, want DELETE_COMPLETE", byID, err)
	}
}
