package access

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/joiner-autoscaler/joiner/shared/awsjson"
	"github.com/joiner-autoscaler/joiner/shared/mototest"
)

const testCAPEM = "-----BEGIN CERTIFICATE-----\nMIIBdummy\n-----END CERTIFICATE-----\n"

// TestSelfManagedSecretFromSecretsManager reads a secret moto holds (written with
// the SDK's client) through awsjson: the secret is read once, validated, and
// cached per container.
func TestSelfManagedSecretFromSecretsManager(t *testing.T) {
	ep := mototest.New(t)
	ctx := context.Background()
	sm := secretsmanager.NewFromConfig(mototest.AWSConfig(ep))
	body, _ := json.Marshal(ClusterSecret{Endpoint: "https://kube.example.internal:6443",
		CAData: base64.StdEncoding.EncodeToString([]byte(testCAPEM)), Token: "sa-token-1"})
	out, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("joiner/kubean"), SecretString: aws.String(string(body))})
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("joiner/bad"),
		SecretString: aws.String(`{"endpoint":"http://kube:6443","caData":"","token":""}`)})

	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	counting := &countingSecrets{api: awsjson.NewSecretsManager(mototest.AWSConfig(ep))}
	deps := Deps{Secrets: counting, Now: func() time.Time { return now }}
	arn := aws.ToString(out.ARN)
	defer ForgetSecret(arn)
	cfg, err := RESTConfig(ctx, Config{Mode: ModeSelfManaged, SecretARN: arn}, deps)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://kube.example.internal:6443" || cfg.BearerToken != "sa-token-1" || string(cfg.CAData) != testCAPEM || cfg.Insecure {
		t.Fatalf("rest config host=%q token=%q ca=%q insecure=%v", cfg.Host, cfg.BearerToken, cfg.CAData, cfg.Insecure)
	}
	if _, err := RESTConfig(ctx, Config{Mode: ModeSelfManaged, SecretARN: arn}, deps); err != nil {
		t.Fatal(err)
	}
	if counting.n != 1 {
		t.Errorf("secret read %d times in one container, want 1 (cached)", counting.n)
	}
	now = now.Add(SecretCacheTTL + time.Second)
	if _, err := RESTConfig(ctx, Config{Mode: ModeSelfManaged, SecretARN: arn}, deps); err != nil {
		t.Fatal(err)
	}
	if counting.n != 2 {
		t.Errorf("secret read %d times, want a re-read after %v", counting.n, SecretCacheTTL)
	}

	_, err = RESTConfig(ctx, Config{Mode: ModeSelfManaged, SecretARN: aws.ToString(bad.ARN)}, deps)
	for _, w := range []string{"https", "caData is empty", "token is empty"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("bad secret: error %v does not name %q", err, w)
		}
	}
	_, err = RESTConfig(ctx, Config{Mode: ModeSelfManaged, SecretARN: "arn:aws:secretsmanager:us-east-1:123456789012:secret:missing"}, deps)
	if err == nil || !strings.Contains(err.Error(), "read secret") || !strings.Contains(err.Error(), "Secrets Manager GetSecretValue") ||
		awsjson.Code(err) != "ResourceNotFoundException" {
		t.Errorf("missing secret: %v", err)
	}
}

type countingSecrets struct {
	api SecretsAPI
	n   int
}

func (c *countingSecrets) GetSecretValue(ctx context.Context, id string) (awsjson.Secret, error) {
	c.n++
	return c.api.GetSecretValue(ctx, id)
}

// TestEKSDescribeCluster reads a cluster moto holds (created with the SDK's
// client) through awsjson.
func TestEKSDescribeCluster(t *testing.T) {
	ep := mototest.New(t)
	ctx := context.Background()
	_, err := eks.NewFromConfig(mototest.AWSConfig(ep)).CreateCluster(ctx, &eks.CreateClusterInput{
		Name: aws.String("technews-karpenter-eks"), RoleArn: aws.String("arn:aws:iam::123456789012:role/eks"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: []string{"subnet-0a1b2c3d"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	api := awsjson.NewEKS(mototest.AWSConfig(ep))
	info, err := describeCluster(ctx, api, "technews-karpenter-eks")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(info.Endpoint, "https://") || len(info.CAData) == 0 {
		t.Fatalf("endpoint %q, %d bytes of CA", info.Endpoint, len(info.CAData))
	}
	cfg, err := RESTConfig(ctx, Config{Mode: ModeEKS, ClusterName: "technews-karpenter-eks", Region: "us-east-1"},
		Deps{EKS: api, AWS: testAWS})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != info.Endpoint || string(cfg.CAData) != string(info.CAData) || cfg.WrapTransport == nil || cfg.BearerToken != "" {
		t.Fatalf("rest config: host %q, token source set %v", cfg.Host, cfg.WrapTransport != nil)
	}
	_, err = describeCluster(ctx, api, "nope")
	if err == nil || !strings.Contains(err.Error(), `eks access: EKS DescribeCluster nope: ResourceNotFoundException (HTTP 404)`) {
		t.Errorf("missing cluster: %v", err)
	}
}
