package site

import (
	"context"
	"testing"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/modelstore"
)

// TestScorerOpensEachKernelOnce: a site daemon reloads its model after
// every run; the kernel plugin of a model is opened once for the daemon's
// life, not once per reload.
func TestScorerOpensEachKernelOnce(t *testing.T) {
	opened := 0
	s := &scorer{open: func(context.Context, modelstore.Kernel) (estimator.Spectral, error) {
		opened++
		return estimator.GaussianSpectral{}, nil
	}}
	ctx := context.Background()
	gauss := modelstore.Kernel{Name: "gaussian", Params: map[string]float64{}}
	for range 3 {
		if _, err := s.spectral(ctx, gauss); err != nil {
			t.Fatal(err)
		}
	}
	if opened != 1 {
		t.Errorf("three reloads with one kernel opened %d plugins, want 1", opened)
	}
	for _, nu := range []float64{0.5, 1.5, 0.5} {
		if _, err := s.spectral(ctx, modelstore.Kernel{Name: "matern", Params: map[string]float64{"nu": nu}}); err != nil {
			t.Fatal(err)
		}
	}
	if opened != 3 {
		t.Errorf("%d plugins opened for gaussian, matern(nu=0.5) and matern(nu=1.5), want 3", opened)
	}
}
