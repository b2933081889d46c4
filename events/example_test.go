package events_test

import (
	"errors"
	"fmt"

	"github.com/joiner-autoscaler/joiner/events"
)

// Decode turns the bytes a Lambda target receives into a typed event: the handlers
// switch on its type. Events Joiner has no business with come back as *Ignored
// (with the reason), and malformed input is an error naming the problem.
func ExampleDecode() {
	raw := []byte(`{"version": "0", "id": "e-1", "detail-type": "EC2 Spot Instance Interruption Warning",
		"source": "aws.ec2", "account": "123456789012", "time": "2026-12-01T10:00:00Z", "region": "us-east-1",
		"resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0"],
		"detail": {"instance-id": "i-0123456789abcdef0", "instance-action": "terminate"}}`)
	ev, err := events.Decode(raw)
	if err != nil {
		panic(err)
	}
	switch e := ev.(type) {
	case *events.SpotInterruption:
		fmt.Println(e.Kind(), e.InstanceID, "interrupted at", e.Deadline().Format("15:04:05"))
	}

	ev, _ = events.Decode([]byte(`{"version": "0", "id": "e-2", "detail-type": "EC2 Instance Launch Successful",
		"source": "aws.autoscaling", "account": "123456789012", "time": "2026-12-01T10:00:00Z", "region": "us-east-1", "detail": {}}`))
	fmt.Println(ev.Kind()+":", ev.(*events.Ignored).Reason)

	_, err = events.Decode([]byte(`{"detail-type": 7}`))
	fmt.Println(errors.Is(err, events.ErrMalformed), err)
	// Output:
	// SpotInterruption i-0123456789abcdef0 interrupted at 10:02:00
	// Ignored: no Joiner handler for source "aws.autoscaling" detail-type "EC2 Instance Launch Successful"
	// true events: envelope: detail-type: want a string, got a number
}
