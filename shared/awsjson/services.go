package awsjson

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// SSM is the SSM Parameter Store API the functions call.
type SSM struct{ c *Client }

// NewSSM returns an SSM client over cfg (see New).
func NewSSM(cfg aws.Config) *SSM { return &SSM{New(cfg, SSMService)} }

// Client is the underlying JSON client (its limits may be tuned).
func (s *SSM) Client() *Client { return s.c }

// Parameter is an SSM parameter as GetParameter answers it.
type Parameter struct {
	Name     string `json:"Name"`
	Type     string `json:"Type"`
	Value    string `json:"Value"`
	Version  int64  `json:"Version"`
	ARN      string `json:"ARN"`
	DataType string `json:"DataType"`
	// LastModifiedDate is epoch seconds (awsJson timestamps are numbers).
	LastModifiedDate float64 `json:"LastModifiedDate"`
}

// GetParameter reads one parameter (SecureString values stay encrypted). A
// missing parameter is an *Error with Code "ParameterNotFound".
func (s *SSM) GetParameter(ctx context.Context, name string) (Parameter, error) {
	if name == "" {
		return Parameter{}, errors.New("SSM GetParameter: empty parameter name")
	}
	var out struct {
		Parameter *Parameter `json:"Parameter"`
	}
	if err := s.c.Call(ctx, "GetParameter", name, map[string]any{"Name": name}, &out); err != nil {
		return Parameter{}, err
	}
	if out.Parameter == nil {
		return Parameter{}, fmt.Errorf("SSM GetParameter %s: answer has no Parameter", name)
	}
	return *out.Parameter, nil
}

// PutParameterInput is what PutParameter writes.
type PutParameterInput struct {
	Name  string `json:"Name"`
	Value string `json:"Value"`
	// Type is String, StringList or SecureString (String when empty).
	Type        string `json:"Type,omitempty"`
	Description string `json:"Description,omitempty"`
	// Overwrite replaces an existing value (a new version); without it an
	// existing parameter is an *Error with Code "ParameterAlreadyExists".
	Overwrite bool `json:"Overwrite,omitempty"`
	// Tier is Standard (4 KB values), Advanced (8 KB) or Intelligent-Tiering.
	Tier string `json:"Tier,omitempty"`
}

// PutParameter writes a parameter and returns its new version.
func (s *SSM) PutParameter(ctx context.Context, in PutParameterInput) (int64, error) {
	if in.Name == "" {
		return 0, errors.New("SSM PutParameter: empty parameter name")
	}
	if in.Type == "" {
		in.Type = "String"
	}
	var out struct {
		Version int64 `json:"Version"`
	}
	if err := s.c.Call(ctx, "PutParameter", in.Name, in, &out); err != nil {
		return 0, err
	}
	return out.Version, nil
}

// SecretsManager is the Secrets Manager API the functions call.
type SecretsManager struct{ c *Client }

// NewSecretsManager returns a Secrets Manager client over cfg (see New).
func NewSecretsManager(cfg aws.Config) *SecretsManager {
	return &SecretsManager{New(cfg, SecretsManagerService)}
}

// Secret is a secret's value as GetSecretValue answers it.
type Secret struct {
	ARN          string `json:"ARN"`
	Name         string `json:"Name"`
	VersionID    string `json:"VersionId"`
	SecretString string `json:"SecretString"`
	// SecretBinary is decoded from the answer's base64.
	SecretBinary []byte `json:"SecretBinary"`
}

// GetSecretValue reads the current version of a secret (by name or ARN).
func (s *SecretsManager) GetSecretValue(ctx context.Context, id string) (Secret, error) {
	if id == "" {
		return Secret{}, errors.New("Secrets Manager GetSecretValue: empty secret id")
	}
	var out Secret
	if err := s.c.Call(ctx, "GetSecretValue", id, map[string]any{"SecretId": id}, &out); err != nil {
		return Secret{}, err
	}
	return out, nil
}

// EKS is the EKS API the functions call.
type EKS struct{ c *Client }

// NewEKS returns an EKS client over cfg (see New).
func NewEKS(cfg aws.Config) *EKS { return &EKS{New(cfg, EKSService)} }

// Cluster is the part of DescribeCluster's answer Joiner reads.
type Cluster struct {
	Name     string `json:"name"`
	ARN      string `json:"arn"`
	Endpoint string `json:"endpoint"`
	// Status is CREATING, ACTIVE, DELETING, FAILED, UPDATING or PENDING.
	Status  string `json:"status"`
	Version string `json:"version"`
	// CertificateAuthority.Data is the base64 PEM CA bundle.
	CertificateAuthority struct {
		Data string `json:"data"`
	} `json:"certificateAuthority"`
	KubernetesNetworkConfig struct {
		ServiceIPv4CIDR string `json:"serviceIpv4Cidr"`
		ServiceIPv6CIDR string `json:"serviceIpv6Cidr"`
		IPFamily        string `json:"ipFamily"`
	} `json:"kubernetesNetworkConfig"`
}

// DescribeCluster reads a cluster (GET /clusters/{name}). A missing cluster is an
// *Error with Code "ResourceNotFoundException".
func (e *EKS) DescribeCluster(ctx context.Context, name string) (Cluster, error) {
	if name == "" {
		return Cluster{}, errors.New("EKS DescribeCluster: empty cluster name")
	}
	var out struct {
		Cluster *Cluster `json:"cluster"`
	}
	if err := e.c.Get(ctx, "DescribeCluster", name, "/clusters/"+url.PathEscape(name), &out); err != nil {
		return Cluster{}, err
	}
	if out.Cluster == nil {
		return Cluster{}, fmt.Errorf("EKS DescribeCluster %s: answer has no cluster", name)
	}
	return *out.Cluster, nil
}
