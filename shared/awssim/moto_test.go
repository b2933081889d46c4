package awssim

import (
	"os"
	"testing"

	"github.com/joiner-autoscaler/joiner/shared/mototest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	mototest.StopShared()
	os.Exit(code)
}

// motoEndpoint is the moto_server the contract tests share, started on first use.
func motoEndpoint(t testing.TB) string { return mototest.Shared(t) }
