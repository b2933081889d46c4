package access

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"golang.org/x/oauth2"
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
type TokenGenerator struct {
	presign *sts.PresignClient
	cluster string
	now     func() time.Time
}

// NewTokenGenerator returns a generator for cluster using client's region and
// credentials. now is the clock used as the signing time (time.Now when nil).
func NewTokenGenerator(client *sts.Client, cluster string, now func() time.Time) *TokenGenerator {
	if now == nil {
		now = time.Now
	}
	return &TokenGenerator{
		presign: sts.NewPresignClient(client, func(o *sts.PresignOptions) {
			o.Presigner = clockedPresigner{signer: v4.NewSigner(), now: now}
		}),
		cluster: cluster,
		now:     now,
	}
}

// Get returns a fresh token.
func (g *TokenGenerator) Get(ctx context.Context) (Token, error) {
	signedAt := g.now()
	req, err := g.presign.PresignGetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}, func(o *sts.PresignOptions) {
		o.ClientOptions = append(o.ClientOptions, func(so *sts.Options) {
			so.APIOptions = append(so.APIOptions,
				smithyhttp.SetHeaderValue(ClusterIDHeader, g.cluster),
				// X-Amz-* headers are hoisted into the query string when presigning.
				smithyhttp.SetHeaderValue("X-Amz-Expires", presignExpiresSeconds),
			)
		})
	})
	if err != nil {
		return Token{}, fmt.Errorf("eks token for cluster %q: presign sts:GetCallerIdentity: %w", g.cluster, err)
	}
	if !strings.Contains(strings.ToLower(req.URL), "x-amz-signedheaders=host%3b"+ClusterIDHeader) {
		return Token{}, fmt.Errorf("eks token for cluster %q: presigned URL does not sign the %s header", g.cluster, ClusterIDHeader)
	}
	return Token{
		Value:  TokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(req.URL)),
		Expiry: signedAt.Add(TokenLifetime - tokenRefreshMargin),
	}, nil
}

// clockedPresigner signs with the generator's clock instead of the SDK's internal one,
// so the token's validity window is known exactly (and tests can fix the time).
type clockedPresigner struct {
	signer *v4.Signer
	now    func() time.Time
}

func (p clockedPresigner) PresignHTTP(ctx context.Context, creds aws.Credentials, r *http.Request, payloadHash, service, region string,
	_ time.Time, optFns ...func(*v4.SignerOptions)) (string, http.Header, error) {
	return p.signer.PresignHTTP(ctx, creds, r, payloadHash, service, region, p.now().UTC(), optFns...)
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
