package mototest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
)

// token is an unsigned JWT with the claims an API server puts in a projected
// ServiceAccount token (moto_iam.py reads the claims; it cannot verify signatures).
func token(t *testing.T, iss, sub, aud string) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(map[string]string{"alg": "RS256"}) + "." + enc(map[string]any{"iss": iss, "sub": sub, "aud": []string{aud}}) + ".c2ln"
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// TestIAMEnforcementJudgesWhatIAMJudges: moto_iam.py decides what AWS decides on the
// checks iam-simulate alone would get wrong: an IRSA trust policy's conditions on the
// provider's own keys (sub, aud: keys iam-simulate ignores), AWS's account-less public
// SSM parameter ARNs (which iam-simulate refuses to evaluate), and multivalued
// events:source/detail-type keys; refusals come back in each protocol's error shape.
func TestIAMEnforcementJudgesWhatIAMJudges(t *testing.T) {
	s, log := startWithIAM(t)
	ctx := context.Background()
	admin := AWSConfig(s.URL)
	ic := iam.NewFromConfig(admin)
	const issuer = "oidc.mototest.joiner.test/cluster"
	provider := "arn:aws:iam::123456789012:oidc-provider/" + issuer
	if _, err := ic.CreateOpenIDConnectProvider(ctx, &iam.CreateOpenIDConnectProviderInput{Url: aws.String("https://" + issuer),
		// "vault" too, so that the trust policy's aud condition, not the provider's
		// client IDs, is what refuses a token for it.
		ClientIDList: []string{"sts.amazonaws.com", "vault"}, ThumbprintList: []string{strings.Repeat("a", 40)}}); err != nil {
		t.Fatal(err)
	}
	trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Federated":"` + provider + `"},` +
		`"Action":"sts:AssumeRoleWithWebIdentity","Condition":{"StringEquals":{"` + issuer + `:aud":"sts.amazonaws.com"},` +
		`"StringLike":{"` + issuer + `:sub":"system:serviceaccount:joiner:joiner-*"}}}]}`
	role, err := ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("forwarder"), AssumeRolePolicyDocument: aws.String(trust)})
	if err != nil {
		t.Fatal(err)
	}
	policy := `{"Version":"2012-10-17","Statement":[` +
		`{"Effect":"Allow","Action":"ssm:GetParameter","Resource":"arn:aws:ssm:us-east-1::parameter/aws/service/eks/*"},` +
		`{"Effect":"Allow","Action":"events:PutEvents","Resource":"arn:aws:events:us-east-1:123456789012:event-bus/default",` +
		`"Condition":{"ForAllValues:StringEquals":{"events:source":"joiner.forwarder"},"Null":{"events:source":"false"}}}]}`
	if _, err := ic.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String("forwarder"), PolicyName: aws.String("p"),
		PolicyDocument: aws.String(policy)}); err != nil {
		t.Fatal(err)
	}
	if err := s.PublishPublicParameters(map[string]string{
		"/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/standard/recommended/image_id": "ami-0123456789abcdef0",
		"/aws/service/bottlerocket/aws-k8s-1.37/x86_64/latest/image_id":                              "ami-0123456789abcdef1",
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.EnforceIAM(ctx); err != nil {
		t.Fatal(err)
	}

	stsc := sts.NewFromConfig(admin, func(o *sts.Options) { o.Credentials = aws.AnonymousCredentials{} })
	assume := func(tok string) (*sts.AssumeRoleWithWebIdentityOutput, error) {
		return stsc.AssumeRoleWithWebIdentity(ctx, &sts.AssumeRoleWithWebIdentityInput{RoleArn: role.Role.Arn,
			RoleSessionName: aws.String("t"), WebIdentityToken: aws.String(tok)})
	}
	for _, c := range []struct{ name, sub, aud, want string }{
		{"another namespace's ServiceAccount", "system:serviceaccount:default:joiner-forwarder", "sts.amazonaws.com", "AccessDenied"},
		{"a token for another audience", "system:serviceaccount:joiner:joiner-forwarder", "vault", "AccessDenied"},
	} {
		if _, err := assume(token(t, "https://"+issuer, c.sub, c.aud)); errorCode(err) != c.want {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
	}
	out, err := assume(token(t, "https://"+issuer, "system:serviceaccount:joiner:joiner-forwarder", "sts.amazonaws.com"))
	if err != nil {
		t.Fatalf("the trusted ServiceAccount: %v", err)
	}
	cfg := admin.Copy()
	cfg.Credentials = credentials.NewStaticCredentialsProvider(aws.ToString(out.Credentials.AccessKeyId),
		aws.ToString(out.Credentials.SecretAccessKey), aws.ToString(out.Credentials.SessionToken))

	sc := ssm.NewFromConfig(cfg)
	if p, err := sc.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/standard/recommended/image_id")}); err != nil ||
		aws.ToString(p.Parameter.Value) != "ami-0123456789abcdef0" {
		t.Errorf("a public parameter the account-less grant covers: %v", err)
	}
	if _, err := sc.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/aws/service/bottlerocket/aws-k8s-1.37/x86_64/latest/image_id")}); errorCode(err) != "AccessDeniedException" {
		t.Errorf("a public parameter outside the grant: %v, want AccessDeniedException", err)
	}

	eb := eventbridge.NewFromConfig(cfg)
	put := func(sources ...string) error {
		var entries []ebtypes.PutEventsRequestEntry
		for _, src := range sources {
			entries = append(entries, ebtypes.PutEventsRequestEntry{Source: aws.String(src), DetailType: aws.String("Pending Pods"), Detail: aws.String("{}")})
		}
		_, err := eb.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: entries})
		return err
	}
	if err := put("joiner.forwarder", "joiner.forwarder"); err != nil {
		t.Errorf("entries all from the allowed source: %v", err)
	}
	if err := put("joiner.forwarder", "aws.ec2"); errorCode(err) != "AccessDeniedException" {
		t.Errorf("one entry from another source: %v, want AccessDeniedException", err)
	}

	// Every decision is in the log, the refused ones with the check that failed.
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var allowed, refused int
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var d struct{ Result string }
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if d.Result == "Allowed" {
			allowed++
		} else {
			refused++
		}
	}
	if allowed != 3 || refused != 4 {
		t.Errorf("log: %d allowed, %d refused; want 3 and 4:\n%s", allowed, refused, b)
	}
}

// startWithIAM starts moto_server behind moto_iam.py's IAM enforcement for one
// test and returns it with the path of its decision log.
func startWithIAM(t *testing.T) (*Server, string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "iam.jsonl")
	s, err := StartWithIAM(root, log)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(s.Close)
	return s, log
}
