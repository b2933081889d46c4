package mototest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EKS bearer tokens (aws-iam-authenticator's v1 format, what `aws eks get-token` and
// Joiner's functions send).
const (
	eksTokenPrefix  = "k8s-aws-v1."
	eksClusterIDHdr = "x-k8s-aws-id"
	// eksTokenLifetime is how long after X-Amz-Date EKS accepts a token, whatever
	// its X-Amz-Expires says.
	eksTokenLifetime = 15 * time.Minute
)

// stsHost is the host a token's presigned URL may name: STS's global or a regional
// endpoint (aws-iam-authenticator's list, without the other partitions).
var stsHost = regexp.MustCompile(`^sts(\.[a-z0-9-]+)?\.amazonaws\.com$`)

// EKSIdentity is the Kubernetes user an access entry maps an IAM principal to.
type EKSIdentity struct {
	// Username may hold {{SessionName}} and {{AccountID}}, as an access entry's may.
	Username string
	Groups   []string
}

// EKSReview is one decision of the authenticator.
type EKSReview struct {
	ARN      string // the caller STS answered with, if it got that far
	Username string
	Groups   []string
	Error    string // why the token was refused; "" when authenticated
}

// EKSAuthenticator is the API server's side of EKS authentication against moto: a
// TokenReview webhook (kube-apiserver --authentication-token-webhook-config-file,
// authentication.k8s.io/v1) that checks a bearer token as EKS's aws-iam-authenticator
// does — the k8s-aws-v1. prefix, a presigned sts:GetCallerIdentity URL on an STS host,
// signing the x-k8s-aws-id header, at most 15 minutes old — then replays the URL to
// moto's STS (moto_iam.py checks the signature as STS does) with x-k8s-aws-id set to
// its own cluster's name, so a token signed for another cluster fails there, and maps
// the ARN STS answers with (an assumed role's, made the role's ARN) to the Kubernetes
// user the cluster's access entry for that role declares. A role without one is
// refused, as EKS refuses it.
type EKSAuthenticator struct {
	// Cluster is the EKS cluster's name, the x-k8s-aws-id tokens must be signed for.
	Cluster string
	// STS is moto's URL; a token's URL is replayed there with its host kept as the
	// Host header.
	STS string

	mu       sync.Mutex
	entries  map[string]EKSIdentity // principal ARN (a role's) -> identity
	reviews  []EKSReview
	now      func() time.Time
	httpDoer *http.Client
}

// Map adds an access entry: principal (a role's ARN) as identity.
func (a *EKSAuthenticator) Map(principal string, identity EKSIdentity) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.entries == nil {
		a.entries = map[string]EKSIdentity{}
	}
	a.entries[principal] = identity
}

// Reviews returns the decisions so far, in order.
func (a *EKSAuthenticator) Reviews() []EKSReview {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]EKSReview(nil), a.reviews...)
}

// ServeHTTP answers a TokenReview.
func (a *EKSAuthenticator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review authv1.TokenReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rev := a.Authenticate(r.Context(), review.Spec.Token)
	out := authv1.TokenReview{TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenReview"}}
	if rev.Error == "" {
		out.Status = authv1.TokenReviewStatus{Authenticated: true, User: authv1.UserInfo{
			Username: rev.Username, Groups: rev.Groups, Extra: map[string]authv1.ExtraValue{"arn": {rev.ARN}}}}
	} else {
		out.Status = authv1.TokenReviewStatus{Error: rev.Error}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// Authenticate decides on token and records the decision.
func (a *EKSAuthenticator) Authenticate(ctx context.Context, token string) EKSReview {
	rev := a.authenticate(ctx, token)
	a.mu.Lock()
	a.reviews = append(a.reviews, rev)
	a.mu.Unlock()
	return rev
}

func (a *EKSAuthenticator) authenticate(ctx context.Context, token string) EKSReview {
	fail := func(arn, format string, args ...any) EKSReview {
		return EKSReview{ARN: arn, Error: fmt.Sprintf(format, args...)}
	}
	if !strings.HasPrefix(token, eksTokenPrefix) {
		return fail("", "not an EKS token (no %s prefix)", eksTokenPrefix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(token, eksTokenPrefix))
	if err != nil {
		return fail("", "token is not base64url: %v", err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		return fail("", "token is not a URL: %v", err)
	}
	q := u.Query()
	if u.Scheme != "https" || !stsHost.MatchString(u.Host) || u.Path != "/" {
		return fail("", "token's URL %s://%s%s is not an STS endpoint", u.Scheme, u.Host, u.Path)
	}
	for k := range q {
		lk := strings.ToLower(k)
		if lk != "action" && lk != "version" && !strings.HasPrefix(lk, "x-amz-") {
			return fail("", "token's URL has parameter %s, not one a presigned GetCallerIdentity has", k)
		}
	}
	if q.Get("Action") != "GetCallerIdentity" {
		return fail("", "token's URL is %s, not GetCallerIdentity", q.Get("Action"))
	}
	if !strings.Contains(";"+strings.ToLower(q.Get("X-Amz-SignedHeaders"))+";", ";"+eksClusterIDHdr+";") {
		return fail("", "token does not sign the %s header", eksClusterIDHdr)
	}
	signed, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil {
		return fail("", "token's X-Amz-Date %q: %v", q.Get("X-Amz-Date"), err)
	}
	now := time.Now
	if a.now != nil {
		now = a.now
	}
	if age := now().Sub(signed); age > eksTokenLifetime {
		return fail("", "token expired: signed %s ago", age.Round(time.Second))
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(a.STS, "/")+"/?"+u.RawQuery, nil)
	if err != nil {
		return fail("", "%v", err)
	}
	// Signed: the host STS is reached as, and the cluster this authenticator is.
	req.Host = u.Host
	req.Header.Set(eksClusterIDHdr, a.Cluster)
	client := a.httpDoer
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return fail("", "sts:GetCallerIdentity: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fail("", "sts:GetCallerIdentity: HTTP %d %s", resp.StatusCode, stsError(body))
	}
	var id struct {
		Result struct {
			Arn     string `xml:"Arn"`
			Account string `xml:"Account"`
		} `xml:"GetCallerIdentityResult"`
	}
	if err := xml.Unmarshal(body, &id); err != nil || id.Result.Arn == "" {
		return fail("", "sts:GetCallerIdentity answered %q", body)
	}
	arn := id.Result.Arn
	principal, session, err := rolePrincipal(arn)
	if err != nil {
		return fail(arn, "%v", err)
	}
	a.mu.Lock()
	entry, ok := a.entries[principal]
	a.mu.Unlock()
	if !ok {
		return fail(arn, "no access entry for %s in cluster %s", principal, a.Cluster)
	}
	name := strings.NewReplacer("{{SessionName}}", session, "{{AccountID}}", id.Result.Account).Replace(entry.Username)
	return EKSReview{ARN: arn, Username: name, Groups: append([]string(nil), entry.Groups...)}
}

// rolePrincipal is the role ARN an assumed role's ARN stands for (what access entries
// name) and its session name.
func rolePrincipal(arn string) (principal, session string, err error) {
	// arn:aws:sts::123456789012:assumed-role/NAME/SESSION
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[2] != "sts" {
		return "", "", fmt.Errorf("caller %s is not an assumed role (only roles have access entries here)", arn)
	}
	res := strings.Split(parts[5], "/")
	if len(res) != 3 || res[0] != "assumed-role" {
		return "", "", fmt.Errorf("caller %s is not an assumed role", arn)
	}
	return "arn:" + parts[1] + ":iam::" + parts[4] + ":role/" + res[1], res[2], nil
}

// stsError is the code and message of an STS error answer.
func stsError(body []byte) string {
	var e struct {
		Error struct {
			Code    string `xml:"Code"`
			Message string `xml:"Message"`
		} `xml:"Error"`
	}
	if err := xml.Unmarshal(body, &e); err != nil || e.Error.Code == "" {
		return strings.TrimSpace(string(body))
	}
	return e.Error.Code + ": " + e.Error.Message
}
