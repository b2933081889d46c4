// Package access builds the authenticated, TLS-verified *rest.Config Joiner's functions
// use to reach a cluster's API server from outside the cluster. Three modes:
//
//   - eks: endpoint and CA from eks:DescribeCluster (or from configuration); a bearer
//     token built the aws-iam-authenticator way (a presigned STS GetCallerIdentity URL)
//     and refreshed before its 15-minute life ends.
//   - self-managed: endpoint, CA bundle and a ServiceAccount token read from an AWS
//     Secrets Manager secret, cached per container.
//   - kubeconfig: a kubeconfig file, for running replay/invoke against a real cluster.
//
// TLS is always verified: no mode accepts an insecure connection.
package access

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// Mode selects how Joiner reaches the cluster.
type Mode string

// Access modes.
const (
	ModeEKS         Mode = "eks"
	ModeSelfManaged Mode = "self-managed"
	ModeKubeconfig  Mode = "kubeconfig"
)

// Environment variables FromEnv reads.
const (
	EnvMode        = "JOINER_CLUSTER_ACCESS"     // eks | self-managed | kubeconfig (inferred when unset)
	EnvClusterName = "JOINER_CLUSTER_NAME"       // EKS cluster name (eks mode; names the cluster elsewhere too)
	EnvEndpoint    = "JOINER_CLUSTER_ENDPOINT"   // eks: https URL, skips DescribeCluster together with EnvCAData
	EnvCAData      = "JOINER_CLUSTER_CA_DATA"    // eks: base64 PEM CA bundle (as in DescribeCluster / kubeconfig)
	EnvSecretARN   = "JOINER_CLUSTER_SECRET_ARN" // self-managed: Secrets Manager secret ARN
	EnvKubeconfig  = "KUBECONFIG"                // kubeconfig mode: path (first of a list)
	EnvContext     = "JOINER_KUBE_CONTEXT"       // kubeconfig mode: context (default: current-context)
	EnvRegion      = "AWS_REGION"                // eks: region of the cluster and of STS
)

// Config says how to reach the cluster. Build one with FromEnv or by hand, then call
// Validate (FromEnv already does).
type Config struct {
	Mode Mode
	// ClusterName is the EKS cluster name: DescribeCluster's argument and the token's
	// x-k8s-aws-id. Optional in the other modes.
	ClusterName string
	// Region is the AWS region of the EKS cluster and of the STS endpoint the token is signed for.
	Region string
	// Endpoint and CAData, when both set in eks mode, replace DescribeCluster.
	Endpoint string
	// CAData is the PEM CA bundle (already base64-decoded).
	CAData []byte
	// SecretARN names the self-managed cluster's Secrets Manager secret.
	SecretARN string
	// Kubeconfig is the kubeconfig path and Context its context ("" = current).
	Kubeconfig string
	Context    string
}

// FromEnv reads a Config from the environment (getenv is os.Getenv when nil). When
// JOINER_CLUSTER_ACCESS is unset the mode is inferred: a secret ARN means self-managed,
// a cluster name means eks, a KUBECONFIG means kubeconfig.
func FromEnv(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Config{
		Mode:        Mode(strings.TrimSpace(getenv(EnvMode))),
		ClusterName: strings.TrimSpace(getenv(EnvClusterName)),
		Region:      strings.TrimSpace(getenv(EnvRegion)),
		Endpoint:    strings.TrimSpace(getenv(EnvEndpoint)),
		SecretARN:   strings.TrimSpace(getenv(EnvSecretARN)),
		Context:     strings.TrimSpace(getenv(EnvContext)),
	}
	if kc := getenv(EnvKubeconfig); kc != "" {
		c.Kubeconfig = strings.Split(kc, string(os.PathListSeparator))[0]
	}
	if ca := strings.TrimSpace(getenv(EnvCAData)); ca != "" {
		pem, err := base64.StdEncoding.DecodeString(ca)
		if err != nil {
			return c, fmt.Errorf("%s: not base64 (want the base64 of a PEM CA bundle, as eks describe-cluster prints): %v", EnvCAData, err)
		}
		c.CAData = pem
	}
	if c.Mode == "" {
		switch {
		case c.SecretARN != "":
			c.Mode = ModeSelfManaged
		case c.ClusterName != "":
			c.Mode = ModeEKS
		case c.Kubeconfig != "":
			c.Mode = ModeKubeconfig
		default:
			return c, fmt.Errorf("cluster access not configured: set %s to eks (with %s and %s), self-managed (with %s) or kubeconfig (with %s)",
				EnvMode, EnvClusterName, EnvRegion, EnvSecretARN, EnvKubeconfig)
		}
	}
	return c, c.Validate()
}

// Validate reports every missing or malformed setting of the chosen mode.
func (c Config) Validate() error {
	var errs []error
	switch c.Mode {
	case ModeEKS:
		if c.ClusterName == "" {
			errs = append(errs, fmt.Errorf("eks access: %s is required (the EKS cluster name signed into the token)", EnvClusterName))
		}
		if c.Region == "" {
			errs = append(errs, fmt.Errorf("eks access: %s is required (the token is signed for sts.<region>.amazonaws.com)", EnvRegion))
		}
		if (c.Endpoint == "") != (len(c.CAData) == 0) {
			errs = append(errs, fmt.Errorf("eks access: set both %s and %s, or neither (then eks:DescribeCluster supplies them)", EnvEndpoint, EnvCAData))
		}
		if c.Endpoint != "" {
			if err := checkEndpoint(c.Endpoint); err != nil {
				errs = append(errs, fmt.Errorf("eks access: %s: %w", EnvEndpoint, err))
			}
		}
	case ModeSelfManaged:
		if c.SecretARN == "" {
			errs = append(errs, fmt.Errorf("self-managed access: %s is required (the Secrets Manager secret holding {\"endpoint\",\"caData\",\"token\"})", EnvSecretARN))
		}
	case ModeKubeconfig:
		if c.Kubeconfig == "" {
			errs = append(errs, fmt.Errorf("kubeconfig access: %s is required", EnvKubeconfig))
		}
	default:
		errs = append(errs, fmt.Errorf("%s=%q: want one of eks, self-managed, kubeconfig", EnvMode, string(c.Mode)))
	}
	return errors.Join(errs...)
}

// checkEndpoint accepts only an https URL with a host: TLS is never optional.
func checkEndpoint(ep string) error {
	u, err := url.Parse(ep)
	if err != nil {
		return fmt.Errorf("invalid URL %q: %v", ep, err)
	}
	if u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("%q is not an https URL with a host (TLS is always verified)", ep)
	}
	return nil
}
