package handlers

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go/logging"
)

// Variables of the Lambda environment LambdaAWSConfig reads.
const (
	EnvAccessKeyID     = "AWS_ACCESS_KEY_ID"
	EnvSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	EnvSessionToken    = "AWS_SESSION_TOKEN"
)

// LambdaAWSConfig is the AWS configuration of a function running in Lambda: the
// credentials of the function's role, which the runtime puts in AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, the region, and AWS_ENDPOINT_URL when
// set (a local simulator under `sam local invoke` or in tests).
//
// It replaces config.LoadDefaultConfig in the functions on purpose: that loader
// links every credential provider a person might use (SSO, console sign-in,
// external processes, assumed roles, instance metadata) with their service clients,
// 1.2 MB of the 20 MB a bootstrap may weigh, none of which a Lambda function uses.
func LambdaAWSConfig(getenv func(string) string, region string, logger logging.Logger) (aws.Config, error) {
	id, secret := strings.TrimSpace(getenv(EnvAccessKeyID)), strings.TrimSpace(getenv(EnvSecretAccessKey))
	var errs []error
	if id == "" || secret == "" {
		errs = append(errs, fmt.Errorf("AWS credentials: %s and %s must be set (the Lambda runtime sets them from the function's role; "+
			"`sam local invoke` from your profile)", EnvAccessKeyID, EnvSecretAccessKey))
	}
	cfg := aws.Config{
		Region: region,
		Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(id, secret,
			strings.TrimSpace(getenv(EnvSessionToken)))),
		Logger: logger,
	}
	if ep := strings.TrimSpace(getenv(EnvAWSEndpointURL)); ep != "" {
		if u, err := url.Parse(ep); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s=%q: want an http(s) URL such as http://127.0.0.1:4566", EnvAWSEndpointURL, ep))
		} else {
			cfg.BaseEndpoint = aws.String(ep)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return aws.Config{}, err
	}
	return cfg, nil
}
