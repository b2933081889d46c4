package handlers

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/joiner-autoscaler/joiner/shared/cloud"
)

// ParameterAPI is what SSMMemory calls on SSM.
type ParameterAPI interface {
	GetParameter(context.Context, *ssm.GetParameterInput, ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
	PutParameter(context.Context, *ssm.PutParameterInput, ...func(*ssm.Options)) (*ssm.PutParameterOutput, error)
}

// SSMMemory keeps shadow mode's memory in one SSM parameter (a String of the
// standard tier, which costs nothing).
type SSMMemory struct {
	API  ParameterAPI
	Name string
}

// NewSSMMemory keeps the cluster's shadow memory in ShadowMemoryParameter(cluster).
func NewSSMMemory(api ParameterAPI, cluster string) *SSMMemory {
	return &SSMMemory{API: api, Name: ShadowMemoryParameter(cluster)}
}

// Load reads the parameter; nil when it does not exist yet.
func (s *SSMMemory) Load(ctx context.Context) ([]byte, error) {
	out, err := s.API.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(s.Name)})
	switch {
	case cloud.ErrorCode(err) == "ParameterNotFound":
		return nil, nil
	case err != nil:
		return nil, err
	case out.Parameter == nil:
		return nil, nil
	}
	return []byte(aws.ToString(out.Parameter.Value)), nil
}

// Save overwrites the parameter.
func (s *SSMMemory) Save(ctx context.Context, value []byte) error {
	_, err := s.API.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(s.Name), Value: aws.String(string(value)),
		Type: ssmtypes.ParameterTypeString, Tier: ssmtypes.ParameterTierStandard, Overwrite: aws.Bool(true),
		Description: aws.String("Joiner's shadow mode: what its rounds would have written (Empty marks, removals); safe to delete")})
	return err
}
