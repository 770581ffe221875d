package kernels_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/plugins/kernels"
	"github.com/crffd/crffd/plugins/kernels/builtin"
)

// badShape returns a sample of the wrong shape.
type badShape struct{ builtin.Gaussian }

func (badShape) Sample(d, n int, seed uint64, p kernels.Params) (*mat.Dense, error) {
	return mat.NewDense(d, n+1, nil), nil
}

// nonFinite returns an infinite frequency.
type nonFinite struct{ builtin.Gaussian }

func (nonFinite) Sample(d, n int, seed uint64, p kernels.Params) (*mat.Dense, error) {
	m := mat.NewDense(d, n, nil)
	m.Set(d-1, n-1, math.Inf(1))
	return m, nil
}

// panicky panics in Sample, as a buggy third-party kernel might.
type panicky struct{ builtin.Gaussian }

func (panicky) Sample(d, n int, seed uint64, p kernels.Params) (*mat.Dense, error) {
	panic("bug in plugin")
}

func TestServerRejectsBadRequests(t *testing.T) {
	ctx := context.Background()
	gauss := kernels.NewTestClient(t, builtin.Gaussian{}, nil)
	matern := kernels.NewTestClient(t, builtin.Matern{}, nil)
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"zero dimension", func() error { _, err := gauss.Sample(ctx, 0, 5, 1); return err }, "dimensions must be positive"},
		{"huge sample", func() error { _, err := gauss.Sample(ctx, 1024, 1<<20, 1); return err }, "at most"},
		{"bad nu", func() error {
			c, err := matern.WithParams(kernels.Params{"nu": 2})
			if err != nil {
				return err
			}
			_, err = c.Sample(ctx, 2, 5, 1)
			return err
		}, "half-integer"},
		{"unknown parameter", func() error { _, err := gauss.WithParams(kernels.Params{"nu": 1.5}); return err }, `no parameter "nu"`},
		{"NaN parameter", func() error { _, err := matern.WithParams(kernels.Params{"nu": math.NaN()}); return err }, "NaN"},
		{"shape mismatch", func() error {
			_, err := gauss.Eval(ctx, mat.NewDense(2, 3, nil), mat.NewDense(2, 2, nil))
			return err
		}, "shapes 2×3 and 2×2 differ"},
		{"wrong sample shape", func() error {
			_, err := kernels.NewTestClient(t, badShape{}, nil).Sample(ctx, 2, 3, 1)
			return err
		}, "returned a 2×4 sample"},
		{"non-finite sample", func() error {
			_, err := kernels.NewTestClient(t, nonFinite{}, nil).Sample(ctx, 2, 3, 1)
			return err
		}, "non-finite frequency at (1, 2)"},
		{"panicking kernel", func() error {
			_, err := kernels.NewTestClient(t, panicky{}, nil).Sample(ctx, 2, 3, 1)
			return err
		}, "sample panicked: bug in plugin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestClientRoundTrip(t *testing.T) {
	ctx := context.Background()
	c := kernels.NewTestClient(t, builtin.Matern{}, kernels.Params{"nu": 2.5})
	if got := c.Params().String(); got != "nu=2.5" {
		t.Errorf("Params = %s, want nu=2.5", got)
	}
	got, err := c.Sample(ctx, 3, 7, 11)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := builtin.Matern{}.Sample(3, 7, 11, kernels.Params{"nu": 2.5})
	if !mat.Equal(got, want) {
		t.Error("sample through gRPC differs from the in-process sample")
	}
	a := mat.NewDense(2, 2, []float64{0, 0, 1, 1})
	b := mat.NewDense(2, 2, []float64{0, 0, 1, 2})
	k, err := c.Eval(ctx, a, b)
	if err != nil {
		t.Fatal(err)
	}
	if k[0] != 1 || math.Abs(k[1]-(1+math.Sqrt(5)+5.0/3)*math.Exp(-math.Sqrt(5))) > 1e-14 {
		t.Errorf("Eval = %v", k)
	}
}

func TestResolve(t *testing.T) {
	in := builtin.Matern{}.Info()
	p, err := in.Resolve(nil)
	if err != nil || p["nu"] != 1.5 {
		t.Errorf("Resolve(nil) = %v, %v; want nu=1.5", p, err)
	}
	if _, err := in.Resolve(kernels.Params{"lengthscale": 2}); !errors.Is(err, kernels.ErrParam) {
		t.Errorf("unknown parameter: err = %v, want ErrParam", err)
	}
}
