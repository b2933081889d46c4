package access

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

const (
	testAKID   = "AKIDEXAMPLE"
	testSecret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
)

var (
	testCreds = credentials.NewStaticCredentialsProvider(testAKID, testSecret, "")
	// testAWS is the AWS configuration eks access signs its tokens with.
	testAWS = aws.Config{Credentials: testCreds}
)

// decodeToken undoes k8s-aws-v1. + base64url, as aws-iam-authenticator's server does.
func decodeToken(t *testing.T, tok string) *url.URL {
	t.Helper()
	if !strings.HasPrefix(tok, TokenPrefix) {
		t.Fatalf("token %q lacks prefix %q", tok, TokenPrefix)
	}
	if strings.ContainsAny(tok, "=+/") {
		t.Fatalf("token must be unpadded base64url, got %q", tok)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, TokenPrefix))
	if err != nil {
		t.Fatalf("decode token: %v", err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatalf("parse presigned URL %q: %v", raw, err)
	}
	return u
}

func hmacSHA256(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

// sigV4Signature computes the presigned-URL signature from the SigV4 specification,
// independently of the SDK, for the request aws-iam-authenticator's server replays
// to STS (GET, empty body, headers host and x-k8s-aws-id).
func sigV4Signature(u *url.URL, cluster, region string, at time.Time) string {
	q := u.Query()
	q.Del("X-Amz-Signature")
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		for _, v := range q[k] {
			parts = append(parts, url.QueryEscape(k)+"="+strings.ReplaceAll(url.QueryEscape(v), "+", "%20"))
		}
	}
	emptyHash := sha256.Sum256(nil)
	canonical := strings.Join([]string{
		"GET", "/", strings.Join(parts, "&"),
		"host:" + u.Host + "\n" + "x-k8s-aws-id:" + cluster + "\n",
		"host;x-k8s-aws-id",
		hex.EncodeToString(emptyHash[:]),
	}, "\n")
	day := at.Format("20060102")
	scope := day + "/" + region + "/sts/aws4_request"
	crHash := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + at.Format("20060102T150405Z") + "\n" + scope + "\n" + hex.EncodeToString(crHash[:])
	k := hmacSHA256([]byte("AWS4"+testSecret), day)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, "sts")
	k = hmacSHA256(k, "aws4_request")
	return hex.EncodeToString(hmacSHA256(k, toSign))
}

func TestTokenFormatMatchesAWSIAMAuthenticator(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, region := range []string{"us-east-1", "eu-west-1"} {
		gen := NewTokenGenerator(testCreds, region, "technews-karpenter-eks", func() time.Time { return at })
		tok, err := gen.Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		u := decodeToken(t, tok.Value)
		if u.Scheme != "https" || u.Host != "sts."+region+".amazonaws.com" || u.Path != "/" {
			t.Errorf("%s: URL %s: want https://sts.%s.amazonaws.com/", region, u, region)
		}
		q := u.Query()
		want := map[string]string{
			"Action":              "GetCallerIdentity",
			"Version":             "2011-06-15",
			"X-Amz-Algorithm":     "AWS4-HMAC-SHA256",
			"X-Amz-Credential":    testAKID + "/20250102/" + region + "/sts/aws4_request",
			"X-Amz-Date":          "20250102T030405Z",
			"X-Amz-Expires":       "60",
			"X-Amz-SignedHeaders": "host;x-k8s-aws-id",
		}
		for k, v := range want {
			if got := q.Get(k); got != v {
				t.Errorf("%s: query %s = %q, want %q (URL %s)", region, k, got, v, u)
			}
		}
		if got, wantSig := q.Get("X-Amz-Signature"), sigV4Signature(u, "technews-karpenter-eks", region, at); got != wantSig {
			t.Errorf("%s: signature %s, want %s computed from the SigV4 spec", region, got, wantSig)
		}
		if want := at.Add(14 * time.Minute); !tok.Expiry.Equal(want) {
			t.Errorf("expiry %v, want %v (a minute before the 15-minute life ends)", tok.Expiry, want)
		}
	}
}

func TestTokenDiffersPerCluster(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	a, _ := NewTokenGenerator(testCreds, "us-east-1", "a", func() time.Time { return at }).Get(context.Background())
	b, _ := NewTokenGenerator(testCreds, "us-east-1", "b", func() time.Time { return at }).Get(context.Background())
	if a.Value == b.Value {
		t.Fatal("tokens for two clusters must differ: the cluster id is a signed header")
	}
}

func TestTokenSourceRefreshesBeforeExpiry(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	gen := NewTokenGenerator(testCreds, "us-west-2", "c", func() time.Time { return now })
	ts := gen.TokenSource(context.Background())
	first, err := ts.Token()
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(13*time.Minute + 59*time.Second)
	again, _ := ts.Token()
	if again.AccessToken != first.AccessToken {
		t.Error("token renewed while still valid for more than a minute")
	}
	now = now.Add(2 * time.Second) // 14m01s after signing: inside the last minute
	renewed, _ := ts.Token()
	if renewed.AccessToken == first.AccessToken {
		t.Fatal("token not renewed in the last minute of its 15-minute life")
	}
	if got := decodeToken(t, renewed.AccessToken).Query().Get("X-Amz-Date"); got != "20250102T031806Z" {
		t.Errorf("renewed token signed at %s, want 20250102T031806Z", got)
	}
}

// TestTokenSessionAndPartition: a role's session token travels in the presigned
// query (STS rejects the URL without it), and China regions sign for their own
// partition's STS host.
func TestTokenSessionAndPartition(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	creds := credentials.NewStaticCredentialsProvider(testAKID, testSecret, "session-token")
	tok, err := NewTokenGenerator(creds, "cn-north-1", "c", func() time.Time { return at }).Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	u := decodeToken(t, tok.Value)
	if u.Host != "sts.cn-north-1.amazonaws.com.cn" {
		t.Errorf("host %s, want sts.cn-north-1.amazonaws.com.cn", u.Host)
	}
	if got := u.Query().Get("X-Amz-Security-Token"); got != "session-token" {
		t.Errorf("X-Amz-Security-Token %q, want the session token", got)
	}
	if _, err := NewTokenGenerator(nil, "us-east-1", "c", nil).Get(context.Background()); err == nil || !strings.Contains(err.Error(), "no AWS credentials") {
		t.Errorf("without credentials: %v", err)
	}
}
