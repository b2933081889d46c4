package handlers

import (
	"context"
	"strings"
	"testing"
)

func TestLambdaAWSConfig(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	cfg, err := LambdaAWSConfig(env(map[string]string{
		EnvAccessKeyID: "AKIDLAMBDA", EnvSecretAccessKey: "secret", EnvSessionToken: "token", EnvAWSEndpointURL: "http://127.0.0.1:4566",
	}), "eu-west-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "eu-west-1" || cfg.BaseEndpoint == nil || *cfg.BaseEndpoint != "http://127.0.0.1:4566" {
		t.Errorf("region %q, endpoint %v", cfg.Region, cfg.BaseEndpoint)
	}
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil || creds.AccessKeyID != "AKIDLAMBDA" || creds.SecretAccessKey != "secret" || creds.SessionToken != "token" {
		t.Errorf("credentials %+v, %v", creds, err)
	}

	cfg, err = LambdaAWSConfig(env(map[string]string{EnvAccessKeyID: "AKID", EnvSecretAccessKey: "s"}), "us-east-1", nil)
	if err != nil || cfg.BaseEndpoint != nil {
		t.Errorf("without AWS_ENDPOINT_URL: endpoint %v, err %v; want the regional endpoints", cfg.BaseEndpoint, err)
	}

	_, err = LambdaAWSConfig(env(map[string]string{EnvAWSEndpointURL: "127.0.0.1:4566"}), "us-east-1", nil)
	if err == nil {
		t.Fatal("no credentials and a malformed endpoint: no error")
	}
	for _, want := range []string{EnvAccessKeyID, EnvSecretAccessKey, EnvAWSEndpointURL + `="127.0.0.1:4566"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}
