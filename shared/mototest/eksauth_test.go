package mototest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/joiner-autoscaler/joiner/shared/kube/access"
)

// TestEKSTokensAuthenticateAgainstSTS: an EKS token Joiner's functions make (access's
// TokenGenerator) authenticates, with moto's IAM enforcement on, as the assumed role
// that signed it, mapped to its access entry's user; a token for another cluster, one
// with a wrong session token, one older than 15 minutes and one of a role without an
// access entry are refused, each for its own reason. DescribeCluster answers with
// the endpoint and CA ServeEKSCluster gave, and with IAM enforced, to a role allowed to
// make it (moto's signature check of a bodiless GET included).
func TestEKSTokensAuthenticateAgainstSTS(t *testing.T) {
	s, _ := startWithIAM(t)
	ctx := context.Background()
	admin := AWSConfig(s.URL)
	ic := iam.NewFromConfig(admin)
	trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},"Action":"sts:AssumeRole"}]}`
	var roles []string
	for _, name := range []string{"functions", "stranger"} {
		r, err := ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(name), AssumeRolePolicyDocument: aws.String(trust)})
		if err != nil {
			t.Fatal(err)
		}
		roles = append(roles, aws.ToString(r.Role.Arn))
	}
	assume := func(role string) aws.Credentials {
		out, err := sts.NewFromConfig(admin).AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String(role), RoleSessionName: aws.String("fn-session")})
		if err != nil {
			t.Fatal(err)
		}
		c := out.Credentials
		return aws.Credentials{AccessKeyID: aws.ToString(c.AccessKeyId), SecretAccessKey: aws.ToString(c.SecretAccessKey), SessionToken: aws.ToString(c.SessionToken)}
	}
	if _, err := ic.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String("functions"), PolicyName: aws.String("eks"),
		PolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"eks:DescribeCluster","Resource":"arn:aws:eks:us-east-1:123456789012:cluster/eks-a"}]}`)}); err != nil {
		t.Fatal(err)
	}
	fn, stranger := assume(roles[0]), assume(roles[1])

	if _, err := eks.NewFromConfig(admin).CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String("eks-a"),
		RoleArn: aws.String("arn:aws:iam::123456789012:role/eks"), ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: []string{"subnet-0a1b2c3d"}}}); err != nil {
		t.Fatal(err)
	}
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIBdummy\n-----END CERTIFICATE-----\n")
	if err := s.ServeEKSCluster("eks-a", "https://127.0.0.1:6443", ca, "1.37"); err != nil {
		t.Fatal(err)
	}
	d, err := eks.NewFromConfig(admin).DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("eks-a")})
	if err != nil || aws.ToString(d.Cluster.Endpoint) != "https://127.0.0.1:6443" || aws.ToString(d.Cluster.Version) != "1.37" ||
		!strings.HasPrefix(aws.ToString(d.Cluster.CertificateAuthority.Data), "LS0tLS1CRUdJTi") {
		t.Fatalf("DescribeCluster of a served cluster: %+v %v", d, err)
	}

	// What the harness's administrator needs once moto authenticates every request.
	if _, err := ic.CreateUser(ctx, &iam.CreateUserInput{UserName: aws.String("admin")}); err != nil {
		t.Fatal(err)
	}
	if err := s.EnforceIAM(ctx); err != nil {
		t.Fatal(err)
	}
	// A bodiless restJson GET from an assumed role passes moto's signature check and
	// is judged by the role's policy.
	fnEKS := eks.NewFromConfig(admin, func(o *eks.Options) { o.Credentials = credentials.StaticCredentialsProvider{Value: fn} })
	if _, err := fnEKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("eks-a")}); err != nil {
		t.Errorf("DescribeCluster the role may make: %v", err)
	}
	if _, err := fnEKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("eks-b")}); errorCode(err) != "AccessDeniedException" {
		t.Errorf("DescribeCluster of another cluster: %v, want AccessDeniedException", err)
	}

	a := &EKSAuthenticator{Cluster: "eks-a", STS: s.URL}
	a.Map(roles[0], EKSIdentity{Username: "arn:aws:sts::{{AccountID}}:assumed-role/functions/{{SessionName}}", Groups: []string{"joiner:functions"}})
	token := func(c aws.Credentials, cluster string, at time.Time) string {
		tok, err := access.NewTokenGenerator(credentials.StaticCredentialsProvider{Value: c}, "us-east-1", cluster, func() time.Time { return at }).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return tok.Value
	}
	now := time.Now()
	got := a.Authenticate(ctx, token(fn, "eks-a", now))
	if got.Error != "" || got.Username != "arn:aws:sts::123456789012:assumed-role/functions/fn-session" ||
		len(got.Groups) != 1 || got.Groups[0] != "joiner:functions" {
		t.Errorf("the functions' token: %+v, want their access entry's user in joiner:functions", got)
	}
	badToken := fn
	badToken.SessionToken += "x"
	for _, c := range []struct{ name, token, want string }{
		{"a token signed for another cluster", token(fn, "eks-b", now), "SignatureDoesNotMatch"},
		{"a wrong session token", token(badToken, "eks-a", now), "InvalidClientTokenId"},
		{"a token signed 16 minutes ago", token(fn, "eks-a", now.Add(-16*time.Minute)), "token expired"},
		{"a role without an access entry", token(stranger, "eks-a", now), "no access entry for " + roles[1]},
		{"a service account token", "eyJhbGciOiJSUzI1NiJ9.e30.c2ln", "no k8s-aws-v1. prefix"},
	} {
		if got := a.Authenticate(ctx, c.token); !strings.Contains(got.Error, c.want) {
			t.Errorf("%s: %+v, want refused with %q", c.name, got, c.want)
		}
	}
}
