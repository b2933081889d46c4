package cloud

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/pricing"

	"github.com/joiner-autoscaler/joiner/shared/awsjson"
)

// RetryOptions bound the SDK's standard retryer (throttling such as
// RequestLimitExceeded, 5xx and transient network errors are retried with
// jittered exponential backoff).
type RetryOptions struct {
	// MaxAttempts counts the first try; default 5.
	MaxAttempts int
	// MaxBackoff caps one backoff delay; default 5s.
	MaxBackoff time.Duration
}

// Retryer returns an aws.Config retryer factory with the bounds applied.
func (o RetryOptions) Retryer() func() aws.Retryer {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Second
	}
	return func() aws.Retryer {
		return retry.NewStandard(func(s *retry.StandardOptions) {
			s.MaxAttempts = o.MaxAttempts
			s.MaxBackoff = o.MaxBackoff
		})
	}
}

// NewClients builds the real clients from cfg with the bounded retryer: the SDK's
// for EC2, IAM and Pricing, awsjson's for SSM and EKS (see the package doc).
// cfg.BaseEndpoint, when set, points every client at a local endpoint (the
// simulator or moto_server); the Pricing client is built only when pricing is
// true, since the Price List API lives in us-east-1 and is optional.
func NewClients(cfg aws.Config, retries RetryOptions, withPricing bool) Clients {
	cfg = cfg.Copy()
	cfg.Retryer = retries.Retryer()
	c := Clients{
		EC2: ec2.NewFromConfig(cfg),
		IAM: iam.NewFromConfig(cfg),
		SSM: awsjson.NewSSM(cfg),
		EKS: awsjson.NewEKS(cfg),
	}
	if withPricing {
		c.Pricing = pricing.NewFromConfig(cfg, func(o *pricing.Options) {
			if cfg.BaseEndpoint == nil {
				o.Region = "us-east-1"
			}
		})
	}
	return c
}
