package awssim

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// A body past the limit used to be cut at 8 MiB and answered 200 by whatever the
// service made of the half it got (SSM then reported "unexpected EOF"). It is refused
// whole, with HTTP 413, in the format of the service the SDK called.
func TestBodyPastTheLimitIsRefusedWith413(t *testing.T) {
	s, _ := startSim(t, nil)
	c := newClients(s.AWSConfig())
	ctx := context.Background()
	big := strings.Repeat("x", MaxBodyBytes+1)

	_, err := c.ssm.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/big"), Value: aws.String(big), Type: "String"})
	wantAPIErr(t, err, "RequestEntityTooLarge", http.StatusRequestEntityTooLarge)

	_, err = c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{big}})
	wantAPIErr(t, err, "RequestEntityTooLarge", http.StatusRequestEntityTooLarge)

	// Nothing of the refused calls was kept.
	if _, err := c.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/big")}); err == nil {
		t.Fatal("the refused PutParameter stored its parameter")
	}

	resp, err := http.Post(s.Endpoint()+"/_sim/faults", "application/json",
		strings.NewReader(`{"deny": ["`+big+`"]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("POST /_sim/faults past the limit: HTTP %d, want 413", resp.StatusCode)
	}

	// A body just within the limit is still read whole.
	_, err = c.ssm.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/fits"), Value: aws.String("v"), Type: "String"})
	if err != nil {
		t.Fatalf("small PutParameter: %v", err)
	}
}
