package kernelcheck_test

import (
	"context"
	"math"
	"testing"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/internal/kernelcheck"
	"github.com/crffd/crffd/plugins/kernels"
	"github.com/crffd/crffd/plugins/kernels/builtin"
)

// local is a kernel called in process, bound to its parameters, as a
// kernels.Client calls a plugin; the gRPC path is tested in plugins/kernels.
type local struct {
	k kernels.Kernel
	p kernels.Params
}

func newLocal(t *testing.T, k kernels.Kernel, p kernels.Params) local {
	t.Helper()
	resolved, err := k.Info().Resolve(p)
	if err != nil {
		t.Fatal(err)
	}
	return local{k: k, p: resolved}
}

func (l local) Info() kernels.Info     { return l.k.Info() }
func (l local) Params() kernels.Params { return l.p }

func (l local) Sample(_ context.Context, d, n int, seed uint64) (*mat.Dense, error) {
	return l.k.Sample(d, n, seed, l.p)
}

func (l local) Eval(_ context.Context, a, b mat.Matrix) ([]float64, error) {
	n, _ := a.Dims()
	out := make([]float64, n)
	for i := range out {
		v, err := l.k.Eval(mat.Row(nil, i, a), mat.Row(nil, i, b), l.p)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// liar samples Gaussian frequencies but claims the Laplacian kernel: the
// self-test must catch the mismatch.
type liar struct{ builtin.Gaussian }

func (liar) Info() kernels.Info { return kernels.Info{Name: "liar"} }
func (liar) Eval(a, b []float64, _ kernels.Params) (float64, error) {
	return math.Exp(-floats.Distance(a, b, 1)), nil
}

func TestVerifyInProcess(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		kernel kernels.Kernel
		params kernels.Params
		ok     bool
	}{
		{"gaussian", builtin.Gaussian{}, nil, true},
		{"laplacian", builtin.Laplacian{}, nil, true},
		{"matern 0.5", builtin.Matern{}, kernels.Params{"nu": 0.5}, true},
		{"matern 2.5", builtin.Matern{}, kernels.Params{"nu": 2.5}, true},
		{"mismatched kernel", liar{}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newLocal(t, tc.kernel, tc.params)
			r, err := kernelcheck.Verify(ctx, c, kernelcheck.DefaultOptions)
			if err != nil {
				t.Fatal(err)
			}
			if r.OK() != tc.ok {
				t.Errorf("OK() = %v with max error %.4f, want %v", r.OK(), r.MaxAbsErr, tc.ok)
			}
			if r.MinK > 0.2 || r.MaxK < 0.9 {
				t.Errorf("kernel values span [%.3f, %.3f]: the pairs do not cover the kernel's range", r.MinK, r.MaxK)
			}
		})
	}
}
