package pipeline

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/selection"
)

// TestKeptModels: a federated site keeps the run's kernel's model and those of the
// further kernels an ensemble's members need, numbered from 1 in the
// run's order, as modelstore.LoadAll numbers them; other estimators need
// the run's kernel's alone.
func TestKeptModels(t *testing.T) {
	ens := selection.Estimator{Kind: selection.KindEnsemble, Shift: 0.5, Members: []selection.Member{
		{Estimator: selection.Estimator{Kind: selection.KindLatent}, Kernel: 3},
		{Estimator: selection.Estimator{Kind: selection.KindTLearner}, Kernel: 0},
		{Estimator: selection.Estimator{Kind: selection.KindOutcome}, Kernel: 1},
		{Estimator: selection.Estimator{Kind: selection.KindLatent}, Kernel: 1},
	}}
	got, used := KeptModels(ens, 0)
	var kernels []int
	for _, m := range got.Members {
		kernels = append(kernels, m.Kernel)
	}
	if !slices.Equal(used, []int{1, 3}) || !slices.Equal(kernels, []int{2, 0, 1, 1}) || got.Shift != 0.5 {
		t.Errorf("kept models of kernels %v, members renumbered %v (shift %v); want [1 3], [2 0 1 1]", used, kernels, got.Shift)
	}
	if ens.Members[0].Kernel != 3 {
		t.Errorf("KeptModels changed its argument's members: %+v", ens.Members)
	}
	if _, used := KeptModels(selection.Estimator{Kind: selection.KindDR}, 0); used != nil {
		t.Errorf("a DR-learner keeps further models %v", used)
	}
	// Model selection at a site alone keeps the ensemble's first kernel's
	// model first.
	got, used = KeptModels(ens, 1)
	kernels = kernels[:0]
	for _, m := range got.Members {
		kernels = append(kernels, m.Kernel)
	}
	if !slices.Equal(used, []int{0, 3}) || !slices.Equal(kernels, []int{2, 1, 0, 0}) {
		t.Errorf("kept with kernel 1 first: models of kernels %v, members renumbered %v; want [0 3], [2 1 0 0]", used, kernels)
	}
}

func TestKernelLabel(t *testing.T) {
	zero := 0.0
	for _, tc := range []struct {
		k    modelstore.Kernel
		want string
	}{
		{modelstore.Kernel{Name: "gaussian"}, "gaussian"},
		{modelstore.Kernel{Name: "matern", Params: map[string]float64{"nu": 1.5}}, "matern(nu=1.5)"},
		{modelstore.Kernel{Name: "gaussian", GridPoint: selection.GridPoint{Features: 100, Linear: &zero}}, "gaussian(features=100,linear=0)"},
		{modelstore.Kernel{Name: "matern", Params: map[string]float64{"nu": 0.5}, GridPoint: selection.GridPoint{Linear: &zero}}, "matern(nu=0.5,linear=0)"},
	} {
		if got := KernelLabel(tc.k); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.k, got, tc.want)
		}
	}
}

// TestOpenKernels: grid points of one kernel share its plugin, opened
// once; a kernel with other parameters is a plugin of its own; and
// Candidates names each by KernelLabel with its plugin.
func TestOpenKernels(t *testing.T) {
	ks := []modelstore.Kernel{
		{Name: "gaussian"},
		{Name: "gaussian", GridPoint: selection.GridPoint{Features: 50}},
		{Name: "matern", Params: map[string]float64{"nu": 1.5}},
		{Name: "matern", Params: map[string]float64{"nu": 2.5}},
	}
	var opened []string
	open := func(_ context.Context, k modelstore.Kernel) (estimator.Spectral, error) {
		opened = append(opened, KernelLabel(k))
		return estimator.GaussianSpectral{}, nil
	}
	spectra, err := OpenKernels(context.Background(), ks, open)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"gaussian", KernelLabel(ks[2]), KernelLabel(ks[3])}; !slices.Equal(opened, want) {
		t.Errorf("opened %q, want %q", opened, want)
	}
	cands := Candidates(ks, spectra)
	for i, c := range cands {
		if c.Name != KernelLabel(ks[i]) || c.Spectral == nil || c.GridPoint != ks[i].GridPoint {
			t.Errorf("candidate %d: %+v, want %s", i, c, KernelLabel(ks[i]))
		}
	}
	if _, err := OpenKernels(context.Background(), ks, func(context.Context, modelstore.Kernel) (estimator.Spectral, error) {
		return nil, errors.New("no plugin")
	}); err == nil {
		t.Error("OpenKernels: no error from a kernel that does not open")
	}
}
