package access

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"golang.org/x/oauth2"

	"github.com/joiner-autoscaler/joiner/shared/awsjson"
)

const (
	// TokenPrefix starts every EKS bearer token (aws-iam-authenticator's v1 format).
	TokenPrefix = "k8s-aws-v1."
	// ClusterIDHeader binds the presigned URL to one cluster, so a token for one cluster
	// cannot be replayed against another.
	ClusterIDHeader = "x-k8s-aws-id"
	// TokenLifetime is how long EKS accepts a token after it was signed
	// (aws-iam-authenticator rejects older ones whatever X-Amz-Expires says).
	TokenLifetime = 15 * time.Minute
	// tokenRefreshMargin renews the token this long before TokenLifetime ends.
	tokenRefreshMargin = time.Minute
	// presignExpiresSeconds is the X-Amz-Expires aws-iam-authenticator writes.
	presignExpiresSeconds = "60"
)

// Token is a bearer token and the time it stops being accepted.
type Token struct {
	Value string
	// Expiry is when a caller should stop using it (a margin before the real end).
	Expiry time.Time
}

// TokenGenerator builds EKS bearer tokens: a presigned STS GetCallerIdentity URL with
// the signed x-k8s-aws-id header, as `aws eks get-token` and aws-iam-authenticator do.
//
// It presigns with the SDK's SigV4 signer rather than through the STS client: the
// URL is fixed (one query, no body), and the STS client with its protocol stack is
// 0.4 MB of a function's 20 MB budget. The token tests check the signature against
// one computed from the SigV4 specification.
type TokenGenerator struct {
	creds   aws.CredentialsProvider
	region  string
	cluster string
	signer  *v4.Signer
	now     func() time.Time
}

// NewTokenGenerator returns a generator for cluster signing with creds for region's
// STS endpoint. now is the clock used as the signing time (time.Now when nil).
func NewTokenGenerator(creds aws.CredentialsProvider, region, cluster string, now func() time.Time) *TokenGenerator {
	if now == nil {
		now = time.Now
	}
	return &TokenGenerator{creds: creds, region: region, cluster: cluster, signer: v4.NewSigner(), now: now}
}

// emptyPayloadHash is the SHA-256 of an empty body, what a GET signs.
const emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// stsHost is region's regional STS endpoint, the host aws-iam-authenticator accepts.
func stsHost(region string) string {
	return "sts." + region + "." + awsjson.DNSSuffix(region)
}

// Get returns a fresh token.
func (g *TokenGenerator) Get(ctx context.Context) (Token, error) {
	fail := func(err error) (Token, error) {
		return Token{}, fmt.Errorf("eks token for cluster %q: presign sts:GetCallerIdentity: %w", g.cluster, err)
	}
	if g.creds == nil {
		return fail(errors.New("no AWS credentials"))
	}
	creds, err := g.creds.Retrieve(ctx)
	if err != nil {
		return fail(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		"https://"+stsHost(g.region)+"/?Action=GetCallerIdentity&Version=2011-06-15", nil)
	if err != nil {
		return fail(err)
	}
	req.Header.Set(ClusterIDHeader, g.cluster)
	// X-Amz-* headers are hoisted into the query string when presigning.
	req.Header.Set("X-Amz-Expires", presignExpiresSeconds)
	signedAt := g.now()
	signed, _, err := g.signer.PresignHTTP(ctx, creds, req, emptyPayloadHash, "sts", g.region, signedAt.UTC())
	if err != nil {
		return fail(err)
	}
	if !strings.Contains(strings.ToLower(signed), "x-amz-signedheaders=host%3b"+ClusterIDHeader) {
		return Token{}, fmt.Errorf("eks token for cluster %q: presigned URL does not sign the %s header", g.cluster, ClusterIDHeader)
	}
	return Token{
		Value:  TokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(signed)),
		Expiry: signedAt.Add(TokenLifetime - tokenRefreshMargin),
	}, nil
}

// TokenSource adapts the generator to oauth2.TokenSource, reusing a token until a minute
// before its 15-minute life ends; client-go's transport then sets it on every request.
func (g *TokenGenerator) TokenSource(ctx context.Context) oauth2.TokenSource {
	return &cachedTokenSource{gen: g, ctx: ctx}
}

type cachedTokenSource struct {
	gen *TokenGenerator
	ctx context.Context
	mu  sync.Mutex
	tok *Token
}

// Token implements oauth2.TokenSource.
func (s *cachedTokenSource) Token() (*oauth2.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok == nil || !s.gen.now().Before(s.tok.Expiry) {
		t, err := s.gen.Get(context.WithoutCancel(s.ctx))
		if err != nil {
			return nil, err
		}
		s.tok = &t
	}
	return &oauth2.Token{AccessToken: s.tok.Value, TokenType: "Bearer", Expiry: s.tok.Expiry}, nil
}
