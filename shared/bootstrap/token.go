package bootstrap

import (
	"fmt"
	"strings"
)

// EC2NodeClass annotations that configure the kubeadm bootstrap token of a
// self-managed cluster (amiFamily Custom). The token itself never appears in a
// manifest, a launch template, a log line or a NodeClaim: the annotations name
// where it is stored, and the node reads it at boot with its own role.
//
//	joiner.dev/bootstrap-token-parameter: /kubean/bootstrap-token   # SSM SecureString
//	joiner.dev/bootstrap-token-secret: kubean/bootstrap-token       # or Secrets Manager (name or ARN)
//	joiner.dev/ca-cert-hash: sha256:<hex>                           # optional: kubeadm discovery hash
//
// {{ .BootstrapToken }} renders as "${JOINER_BOOTSTRAP_TOKEN}", and a shell line
// that reads the token on the instance into that variable (the AWS CLI, with the
// instance profile's ssm:GetParameter or secretsmanager:GetSecretValue, which
// Joiner's stack grants the node role for exactly that parameter or secret) goes
// where {{ .BootstrapTokenFetch }} is written, else right after the script's
// first line. joiner.dev/bootstrap-token-fetch: instance is accepted for
// compatibility; "launch", which read the token into the launch template, is
// refused.
const (
	AnnotationTokenParameter = "joiner.dev/bootstrap-token-parameter"
	AnnotationTokenSecret    = "joiner.dev/bootstrap-token-secret"
	AnnotationTokenFetch     = "joiner.dev/bootstrap-token-fetch"
	AnnotationCACertHash     = "joiner.dev/ca-cert-hash"

	TokenFetchInstance = "instance"
	// tokenFetchLaunch is the removed mode that wrote the token into launch templates.
	tokenFetchLaunch = "launch"
)

// TokenSource says where a kubeadm bootstrap token is stored and who reads it.
type TokenSource struct {
	// SSMParameter is the name of an SSM SecureString parameter.
	SSMParameter string
	// SecretID is a Secrets Manager secret name or ARN (its SecretString is the token).
	SecretID string
}

// Configured reports whether a source is named.
func (s TokenSource) Configured() bool { return s.SSMParameter != "" || s.SecretID != "" }

// isSafeName matches SSM parameter names and Secrets Manager names and ARNs (1 to
// 1000 of A-Z a-z 0-9 / _ . : + = @ -); it keeps them safe inside single quotes in
// the fetch command. It is a loop, not the regexp ^[A-Za-z0-9/_.:+=@-]{1,1000}$:
// compiling that bounded repetition took 9 ms and 630 KB at every function's start.
func isSafeName(s string) bool {
	if len(s) == 0 || len(s) > 1000 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("/_.:+=@-", c) >= 0) {
			return false
		}
	}
	return true
}

// TokenSourceFromAnnotations reads the token source of an EC2NodeClass.
func TokenSourceFromAnnotations(annotations map[string]string) (TokenSource, error) {
	s := TokenSource{
		SSMParameter: strings.TrimSpace(annotations[AnnotationTokenParameter]),
		SecretID:     strings.TrimSpace(annotations[AnnotationTokenSecret]),
	}
	if s.SSMParameter != "" && s.SecretID != "" {
		return TokenSource{}, fmt.Errorf("annotations %s and %s are both set: name one bootstrap token source", AnnotationTokenParameter, AnnotationTokenSecret)
	}
	for _, v := range []string{s.SSMParameter, s.SecretID} {
		if v != "" && !isSafeName(v) {
			return TokenSource{}, fmt.Errorf("bootstrap token source %q is not a valid SSM parameter or secret name", v)
		}
	}
	switch mode := strings.TrimSpace(annotations[AnnotationTokenFetch]); mode {
	case "":
	case TokenFetchInstance:
		if !s.Configured() {
			return TokenSource{}, fmt.Errorf("annotation %s: %s needs %s or %s to name the token", AnnotationTokenFetch, TokenFetchInstance, AnnotationTokenParameter, AnnotationTokenSecret)
		}
	case tokenFetchLaunch:
		return TokenSource{}, fmt.Errorf("annotation %s: %s is no longer supported: it wrote the bootstrap token in plaintext into the launch template; delete the annotation and the node reads the token itself with its role", AnnotationTokenFetch, tokenFetchLaunch)
	default:
		return TokenSource{}, fmt.Errorf("annotation %s is %q: want %q or leave it out", AnnotationTokenFetch, mode, TokenFetchInstance)
	}
	return s, nil
}

// FetchCommand is the shell line that reads the token on the instance into
// $JOINER_BOOTSTRAP_TOKEN with the AWS CLI, and stops the script when it cannot.
func (s TokenSource) FetchCommand(region string) (string, error) {
	if region != "" && !isSafeName(region) {
		return "", fmt.Errorf("region %q is invalid", region)
	}
	regionArg := ""
	if region != "" {
		regionArg = " --region '" + region + "'"
	}
	switch {
	case s.SSMParameter != "":
		return fmt.Sprintf(`%s="$(aws ssm get-parameter%s --name '%s' --with-decryption --query Parameter.Value --output text)" || { echo "joiner: cannot read the bootstrap token from SSM parameter %s" >&2; exit 1; }`, TokenVariable, regionArg, s.SSMParameter, s.SSMParameter), nil
	case s.SecretID != "":
		return fmt.Sprintf(`%s="$(aws secretsmanager get-secret-value%s --secret-id '%s' --query SecretString --output text)" || { echo "joiner: cannot read the bootstrap token from secret %s" >&2; exit 1; }`, TokenVariable, regionArg, s.SecretID, s.SecretID), nil
	}
	return "", fmt.Errorf("no bootstrap token source configured (annotation %s or %s)", AnnotationTokenParameter, AnnotationTokenSecret)
}
