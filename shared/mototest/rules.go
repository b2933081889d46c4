package mototest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Rule is an EventBridge rule: its name, its bus ("default" or one RulesToQueue
// creates) and its event pattern (marshalled to JSON).
type Rule struct {
	Name, Bus string
	Pattern   any
}

// RulesToQueue creates the queue and, on moto's EventBridge, every rule's bus and the
// rule with the queue as its target, so a test reads what EventBridge delivered as
// the stack's rules would. It returns the queue URL.
func RulesToQueue(t testing.TB, ctx context.Context, eb *eventbridge.Client, q *sqs.Client, queue string, rules ...Rule) string {
	t.Helper()
	qo, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(queue)})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: qo.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	arn := attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	buses := map[string]bool{"default": true}
	for _, r := range rules {
		if !buses[r.Bus] {
			if _, err := eb.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(r.Bus)}); err != nil {
				t.Fatal(err)
			}
			buses[r.Bus] = true
		}
		pattern, err := json.Marshal(r.Pattern)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(r.Name), EventBusName: aws.String(r.Bus),
			EventPattern: aws.String(string(pattern))}); err != nil {
			t.Fatal(err)
		}
		if _, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(r.Name), EventBusName: aws.String(r.Bus),
			Targets: []ebtypes.Target{{Id: aws.String("queue"), Arn: aws.String(arn)}}}); err != nil {
			t.Fatal(err)
		}
	}
	return aws.ToString(qo.QueueUrl)
}
