package handlers

import (
	"context"

	"github.com/joiner-autoscaler/joiner/shared/awsjson"
)

// ParameterAPI is what SSMMemory calls on SSM; *awsjson.SSM implements it (the
// generated SSM client would add its whole API's schema to the bootstraps:
// make size refuses it).
type ParameterAPI interface {
	GetParameter(ctx context.Context, name string) (awsjson.Parameter, error)
	PutParameter(ctx context.Context, in awsjson.PutParameterInput) (int64, error)
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
	out, err := s.API.GetParameter(ctx, s.Name)
	switch {
	case awsjson.Code(err) == "ParameterNotFound":
		return nil, nil
	case err != nil:
		return nil, err
	}
	return []byte(out.Value), nil
}

// Save overwrites the parameter.
func (s *SSMMemory) Save(ctx context.Context, value []byte) error {
	_, err := s.API.PutParameter(ctx, awsjson.PutParameterInput{Name: s.Name, Value: string(value),
		Type: "String", Tier: "Standard", Overwrite: true,
		Description: "Joiner's shadow mode: what its rounds would have written (Empty marks, removals); safe to delete"})
	return err
}
