package access

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/transport"

	"github.com/joiner-autoscaler/joiner/shared/awsjson"
)

// EKSAPI is the one EKS call cluster access makes; *awsjson.EKS implements it
// (the generated EKS client would add its whole API's schema to the bootstraps).
type EKSAPI interface {
	DescribeCluster(ctx context.Context, name string) (awsjson.Cluster, error)
}

// SecretsAPI is the one Secrets Manager call cluster access makes;
// *awsjson.SecretsManager implements it.
type SecretsAPI interface {
	GetSecretValue(ctx context.Context, id string) (awsjson.Secret, error)
}

// Deps are the AWS clients a mode needs; nil ones are built from AWS when required.
type Deps struct {
	// AWS is the SDK configuration (region, credentials, endpoint overrides).
	AWS     aws.Config
	EKS     EKSAPI
	Secrets SecretsAPI
	// Now is the clock for token signing and cache expiry (time.Now when nil).
	Now func() time.Time
}

// DefaultQPS and DefaultBurst replace client-go's 5/10, which would throttle a snapshot
// read of a large cluster and the patch bursts of a drain. They are Karpenter's
// defaults (KUBE_CLIENT_QPS 200, KUBE_CLIENT_BURST 300): a burst that launches 1,323
// nodes writes about 8,000 requests, 160 s at 50 a second; the API server's priority
// and fairness, not the client, is what protects it from a busy controller.
const (
	DefaultQPS   = 200
	DefaultBurst = 300
	// DefaultTimeout bounds one API request; callers bound whole operations with contexts.
	DefaultTimeout = 60 * time.Second
)

// RESTConfig returns the authenticated rest.Config for c. Results that are costly to
// obtain (DescribeCluster, the Secrets Manager secret) are cached per container.
func RESTConfig(ctx context.Context, c Config, d Deps) (*rest.Config, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	var cfg *rest.Config
	var err error
	switch c.Mode {
	case ModeEKS:
		cfg, err = eksConfig(ctx, c, d)
	case ModeSelfManaged:
		cfg, err = selfManagedConfig(ctx, c, d)
	case ModeKubeconfig:
		cfg, err = kubeconfigConfig(c)
	}
	if err != nil {
		return nil, err
	}
	if cfg.Insecure {
		return nil, fmt.Errorf("%s access: refusing an insecure (unverified TLS) connection to %s", c.Mode, cfg.Host)
	}
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = DefaultQPS, DefaultBurst
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	cfg.UserAgent = "joiner"
	return cfg, nil
}

// clusterInfo is an endpoint and its CA bundle.
type clusterInfo struct {
	Endpoint string
	CAData   []byte
}

var describeCache sync.Map // cluster name -> clusterInfo

func eksConfig(ctx context.Context, c Config, d Deps) (*rest.Config, error) {
	info := clusterInfo{Endpoint: c.Endpoint, CAData: c.CAData}
	if info.Endpoint == "" {
		if v, ok := describeCache.Load(c.Region + "/" + c.ClusterName); ok {
			info = v.(clusterInfo)
		} else {
			api := d.EKS
			if api == nil {
				cfg := d.AWS.Copy()
				cfg.Region = c.Region
				api = awsjson.NewEKS(cfg)
			}
			var err error
			if info, err = describeCluster(ctx, api, c.ClusterName); err != nil {
				return nil, err
			}
			describeCache.Store(c.Region+"/"+c.ClusterName, info)
		}
	}
	// The token is signed with AWS's credentials for the cluster's region.
	gen := NewTokenGenerator(d.AWS.Credentials, c.Region, c.ClusterName, d.Now)
	ts := gen.TokenSource(ctx)
	cfg := &rest.Config{
		Host:            info.Endpoint,
		TLSClientConfig: rest.TLSClientConfig{CAData: info.CAData},
		WrapTransport:   func(rt http.RoundTripper) http.RoundTripper { return transport.TokenSourceWrapTransport(ts)(rt) },
	}
	return cfg, nil
}

func describeCluster(ctx context.Context, api EKSAPI, name string) (clusterInfo, error) {
	out, err := api.DescribeCluster(ctx, name)
	if err != nil {
		return clusterInfo{}, fmt.Errorf("eks access: %w", err)
	}
	if out.Endpoint == "" {
		return clusterInfo{}, fmt.Errorf("eks access: cluster %q has no endpoint yet (status %v)", name, cmp.Or(out.Status, "unknown"))
	}
	if out.CertificateAuthority.Data == "" {
		return clusterInfo{}, fmt.Errorf("eks access: cluster %q has no certificate authority data", name)
	}
	ca, err := base64.StdEncoding.DecodeString(out.CertificateAuthority.Data)
	if err != nil {
		return clusterInfo{}, fmt.Errorf("eks access: cluster %q: certificateAuthority.data is not base64: %v", name, err)
	}
	if err := checkEndpoint(out.Endpoint); err != nil {
		return clusterInfo{}, fmt.Errorf("eks access: cluster %q endpoint: %w", name, err)
	}
	return clusterInfo{Endpoint: out.Endpoint, CAData: ca}, nil
}

// ClusterSecret is the JSON document a self-managed cluster's secret holds.
type ClusterSecret struct {
	// Endpoint is the API server URL (https).
	Endpoint string `json:"endpoint"`
	// CAData is the base64 of the PEM CA bundle (as in a kubeconfig's certificate-authority-data).
	CAData string `json:"caData"`
	// Token is a ServiceAccount token bound to the joiner:functions group's permissions.
	Token string `json:"token"`
}

// SecretCacheTTL is how long a read secret is reused; a rotated token is picked up after it.
const SecretCacheTTL = 15 * time.Minute

type cachedSecret struct {
	info  clusterInfo
	token string
	read  time.Time
}

var (
	secretMu    sync.Mutex
	secretCache = map[string]cachedSecret{}
)

func selfManagedConfig(ctx context.Context, c Config, d Deps) (*rest.Config, error) {
	secretMu.Lock()
	cs, ok := secretCache[c.SecretARN]
	secretMu.Unlock()
	if !ok || d.Now().Sub(cs.read) > SecretCacheTTL {
		api := d.Secrets
		if api == nil {
			api = awsjson.NewSecretsManager(d.AWS)
		}
		var err error
		if cs, err = readClusterSecret(ctx, api, c.SecretARN); err != nil {
			return nil, err
		}
		cs.read = d.Now()
		secretMu.Lock()
		secretCache[c.SecretARN] = cs
		secretMu.Unlock()
	}
	return &rest.Config{
		Host:            cs.info.Endpoint,
		BearerToken:     cs.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cs.info.CAData},
	}, nil
}

// ForgetSecret drops the cached secret, e.g. after the API server answered 401.
func ForgetSecret(arn string) {
	secretMu.Lock()
	delete(secretCache, arn)
	secretMu.Unlock()
}

func readClusterSecret(ctx context.Context, api SecretsAPI, arn string) (cachedSecret, error) {
	out, err := api.GetSecretValue(ctx, arn)
	if err != nil {
		return cachedSecret{}, fmt.Errorf("self-managed access: read secret %s: %w", arn, err)
	}
	var s ClusterSecret
	if err := json.Unmarshal([]byte(out.SecretString), &s); err != nil {
		return cachedSecret{}, fmt.Errorf("self-managed access: secret %s is not JSON {\"endpoint\",\"caData\",\"token\"}: %v", arn, err)
	}
	var errs []error
	if err := checkEndpoint(s.Endpoint); err != nil {
		errs = append(errs, fmt.Errorf("endpoint: %w", err))
	}
	ca, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s.CAData))
	switch {
	case s.CAData == "":
		errs = append(errs, errors.New("caData is empty (TLS is always verified: store the base64 PEM CA bundle)"))
	case err != nil:
		errs = append(errs, fmt.Errorf("caData is not base64: %v", err))
	case !strings.Contains(string(ca), "-----BEGIN CERTIFICATE-----"):
		errs = append(errs, errors.New("caData does not decode to a PEM certificate"))
	}
	if strings.TrimSpace(s.Token) == "" {
		errs = append(errs, errors.New("token is empty"))
	}
	if len(errs) > 0 {
		return cachedSecret{}, fmt.Errorf("self-managed access: secret %s: %w", arn, errors.Join(errs...))
	}
	return cachedSecret{info: clusterInfo{Endpoint: s.Endpoint, CAData: ca}, token: strings.TrimSpace(s.Token)}, nil
}

func kubeconfigConfig(c Config) (*rest.Config, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: c.Kubeconfig}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: c.Context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig access: %s: %w", c.Kubeconfig, err)
	}
	return cfg, nil
}
