package awssim

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// SSM refuses a value past its tier's limit (Standard 4 KB, Advanced 8 KB:
// https://docs.aws.amazon.com/systems-manager/latest/userguide/parameter-store-advanced-parameters.html);
// moto does not check, so the simulator cites the documented limits and the message
// AWS answers with.
func TestPutParameterValueLimitByTier(t *testing.T) {
	s, _ := startSim(t, nil)
	c := newClients(s.AWSConfig())
	ctx := context.Background()
	put := func(name string, n int, tier ssmtypes.ParameterTier) (*ssm.PutParameterOutput, error) {
		return c.ssm.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String(strings.Repeat("x", n)),
			Type: ssmtypes.ParameterTypeString, Tier: tier, Overwrite: aws.Bool(true)})
	}
	if out, err := put("/fits", 4096, ""); err != nil || out.Tier != ssmtypes.ParameterTierStandard {
		t.Fatalf("4096 characters, standard: %v %v", out, err)
	}
	_, err := put("/long", 4097, ssmtypes.ParameterTierStandard)
	wantAPIErr(t, err, "ValidationException", http.StatusBadRequest)
	if err == nil || !strings.Contains(err.Error(), "maximum parameter value of 4096 characters") {
		t.Errorf("4097 characters, standard: %v", err)
	}
	_, err = put("/long", 4097, ssmtypes.ParameterTierIntelligentTiering)
	wantAPIErr(t, err, "ValidationException", http.StatusBadRequest)
	if out, err := put("/long", 8192, ssmtypes.ParameterTierAdvanced); err != nil || out.Tier != ssmtypes.ParameterTierAdvanced {
		t.Fatalf("8192 characters, advanced: %v %v", out, err)
	}
	_, err = put("/long", 8193, ssmtypes.ParameterTierAdvanced)
	wantAPIErr(t, err, "ValidationException", http.StatusBadRequest)
	if _, err := c.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/long")}); err != nil {
		t.Fatal(err)
	}
}
