package builtin

import (
	"errors"
	"math"
	"sort"
	"testing"

	"gonum.org/v1/gonum/floats/scalar"
	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat"

	"github.com/crffd/crffd/plugins/kernels"
)

// sampleValues draws d×n frequencies and returns them flattened.
func sampleValues(t *testing.T, k kernels.Kernel, d, n int, seed uint64, p kernels.Params) []float64 {
	t.Helper()
	m, err := k.Sample(d, n, seed, p)
	if err != nil {
		t.Fatalf("Sample: %v", err)
	}
	if r, c := m.Dims(); r != d || c != n {
		t.Fatalf("Sample shape %d×%d, want %d×%d", r, c, d, n)
	}
	return append([]float64(nil), m.RawMatrix().Data...)
}

func median(x []float64) float64 {
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	return stat.Quantile(0.5, stat.Empirical, s, nil)
}

func abs(x []float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = math.Abs(v)
	}
	return out
}

// TestSpectralMoments checks the sample moments of each spectral density
// against theory. The seeds are fixed, so the tolerances (about five
// standard errors at 400 000 draws) make the test deterministic, not flaky.
func TestSpectralMoments(t *testing.T) {
	const d, n = 4, 100000
	for _, tc := range []struct {
		name   string
		kernel kernels.Kernel
		params kernels.Params
		stat   func([]float64) float64
		want   float64
		tol    float64
	}{
		{"gaussian mean", Gaussian{}, nil, mean, 0, 0.01},
		{"gaussian variance", Gaussian{}, nil, variance, 1, 0.015},
		{"cauchy median", Laplacian{}, nil, median, 0, 0.01},
		{"cauchy median of |ω|", Laplacian{}, nil, func(x []float64) float64 { return median(abs(x)) }, 1, 0.015},
		{"matern 2.5 mean", Matern{}, kernels.Params{"nu": 2.5}, mean, 0, 0.015},
		{"matern 2.5 variance 2ν/(2ν−2)", Matern{}, kernels.Params{"nu": 2.5}, variance, 5.0 / 3, 0.06},
		{"matern 1.5 mean", Matern{}, kernels.Params{"nu": 1.5}, mean, 0, 0.02},
		{"matern 0.5 median", Matern{}, kernels.Params{"nu": 0.5}, median, 0, 0.015},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := sampleValues(t, tc.kernel, d, n, 7, tc.params)
			if got := tc.stat(x); math.Abs(got-tc.want) > tc.tol {
				t.Errorf("got %.5f, want %.5f ± %g", got, tc.want, tc.tol)
			}
		})
	}
}

func variance(x []float64) float64 { return stat.Variance(x, nil) }

// TestMaternIsMultivariate checks that Matérn frequencies share one
// chi-square scale per column, as the multivariate t does, rather than
// being independent t coordinates: |ω_1| and |ω_2| are then correlated.
func TestMaternIsMultivariate(t *testing.T) {
	m, err := Matern{}.Sample(2, 100000, 3, kernels.Params{"nu": 2.5})
	if err != nil {
		t.Fatal(err)
	}
	a, b := abs(mat.Row(nil, 0, m)), abs(mat.Row(nil, 1, m))
	if c := stat.Correlation(a, b, nil); c < 0.1 {
		t.Errorf("correlation of |ω1| and |ω2| = %.3f, want clearly positive", c)
	}
	g, _ := Gaussian{}.Sample(2, 100000, 3, nil)
	a, b = abs(mat.Row(nil, 0, g)), abs(mat.Row(nil, 1, g))
	if c := stat.Correlation(a, b, nil); math.Abs(c) > 0.02 {
		t.Errorf("Gaussian correlation of |ω1| and |ω2| = %.3f, want about 0", c)
	}
}

func TestEvalClosedForms(t *testing.T) {
	a := []float64{0.3, -1.2, 0.5}
	for _, r := range []float64{0, 0.1, 0.5, 1, 2, 4} {
		b := []float64{a[0] + r*0.6, a[1] - r*0.8, a[2]} // ‖a−b‖₂ = r, ‖a−b‖₁ = 1.4r
		s3, s5 := math.Sqrt(3)*r, math.Sqrt(5)*r
		for _, tc := range []struct {
			name   string
			kernel kernels.Kernel
			params kernels.Params
			want   float64
		}{
			{"gaussian", Gaussian{}, nil, math.Exp(-r * r / 2)},
			{"laplacian", Laplacian{}, nil, math.Exp(-1.4 * r)},
			{"matern 1/2", Matern{}, kernels.Params{"nu": 0.5}, math.Exp(-r)},
			{"matern 3/2", Matern{}, kernels.Params{"nu": 1.5}, (1 + s3) * math.Exp(-s3)},
			{"matern 5/2", Matern{}, kernels.Params{"nu": 2.5}, (1 + s5 + 5*r*r/3) * math.Exp(-s5)},
		} {
			got, err := tc.kernel.Eval(a, b, tc.params)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if !scalar.EqualWithinAbsOrRel(got, tc.want, 1e-13, 1e-13) {
				t.Errorf("%s at r = %g: got %.16g, want %.16g", tc.name, r, got, tc.want)
			}
		}
	}
}

// TestMaternHighOrderTendsToGaussian checks the general half-integer
// formula beyond the three closed forms: as ν grows Matérn approaches the
// Gaussian kernel, monotonically at a fixed distance.
func TestMaternHighOrderTendsToGaussian(t *testing.T) {
	a, b := []float64{0}, []float64{1}
	gauss, _ := Gaussian{}.Eval(a, b, nil)
	prev := math.Inf(1)
	for _, nu := range []float64{0.5, 1.5, 2.5, 4.5, 7.5, 10.5} {
		k, err := Matern{}.Eval(a, b, kernels.Params{"nu": nu})
		if err != nil {
			t.Fatal(err)
		}
		gap := math.Abs(k - gauss)
		if gap >= prev {
			t.Errorf("nu = %g: |k − gaussian| = %g did not shrink from %g", nu, gap, prev)
		}
		prev = gap
	}
	if prev > 0.025 {
		t.Errorf("nu = 10.5: |k − gaussian| = %g, want < 0.025", prev)
	}
}

func TestMaternRejectsBadNu(t *testing.T) {
	for _, nu := range []float64{0, 1, 2, 0.25, 11.5, -0.5} {
		if _, err := (Matern{}).Sample(2, 3, 1, kernels.Params{"nu": nu}); !errors.Is(err, kernels.ErrParam) {
			t.Errorf("Sample nu = %g: err = %v, want ErrParam", nu, err)
		}
		if _, err := (Matern{}).Eval([]float64{0}, []float64{1}, kernels.Params{"nu": nu}); !errors.Is(err, kernels.ErrParam) {
			t.Errorf("Eval nu = %g: err = %v, want ErrParam", nu, err)
		}
	}
}

// TestSampleDeterministic checks that a seed fixes the frequencies, that
// other seeds change them, and that asking for more columns keeps the first
// ones, so that every site computes the same features.
func TestSampleDeterministic(t *testing.T) {
	for _, k := range []kernels.Kernel{Gaussian{}, Laplacian{}, Matern{}} {
		p := kernels.Params{}
		for _, prm := range k.Info().Params {
			p[prm.Name] = prm.Default
		}
		name := k.Info().Name
		a := sampleValues(t, k, 3, 50, 42, p)
		b := sampleValues(t, k, 3, 50, 42, p)
		c := sampleValues(t, k, 3, 50, 43, p)
		long, _ := k.Sample(3, 80, 42, p)
		short := mat.NewDense(3, 50, a)
		if !mat.Equal(short, long.Slice(0, 3, 0, 50)) {
			t.Errorf("%s: the first 50 of 80 columns differ from a 50-column sample", name)
		}
		for i := range a {
			if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
				t.Fatalf("%s: same seed, value %d differs: %v vs %v", name, i, a[i], b[i])
			}
		}
		same := 0
		for i := range a {
			if a[i] == c[i] {
				same++
			}
		}
		if same > 0 {
			t.Errorf("%s: seeds 42 and 43 share %d of %d values", name, same, len(a))
		}
	}
}

func mean(x []float64) float64 { return stat.Mean(x, nil) }
