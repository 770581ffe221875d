package builtin

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat/distmv"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/crffd/crffd/plugins/kernels"
)

// Version is reported by the built-in kernels' Info.
const Version = "1"

// Gaussian is the squared-exponential kernel exp(−‖a−b‖²/2).
type Gaussian struct{}

// Info describes the kernel.
func (Gaussian) Info() kernels.Info {
	return kernels.Info{Name: "gaussian", Version: Version,
		Description: "squared exponential exp(-|a-b|^2/2); frequencies N(0, I)"}
}

// Sample draws every frequency coordinate from N(0, 1).
func (Gaussian) Sample(d, count int, seed uint64, _ kernels.Params) (*mat.Dense, error) {
	n := distuv.Normal{Mu: 0, Sigma: 1, Src: kernels.NewSource(seed)}
	return kernels.Columns(d, count, func(col []float64) {
		for i := range col {
			col[i] = n.Rand()
		}
	}), nil
}

// Eval returns exp(−‖a−b‖²/2).
func (Gaussian) Eval(a, b []float64, _ kernels.Params) (float64, error) {
	r := floats.Distance(a, b, 2)
	return math.Exp(-r * r / 2), nil
}

// Laplacian is the kernel exp(−‖a−b‖₁), a product of one-dimensional
// exponential kernels.
type Laplacian struct{}

// Info describes the kernel.
func (Laplacian) Info() kernels.Info {
	return kernels.Info{Name: "laplacian", Version: Version,
		Description: "exp(-|a-b|_1); frequencies standard Cauchy per coordinate"}
}

// Sample draws every frequency coordinate from the standard Cauchy
// distribution, which is Student's t with one degree of freedom.
func (Laplacian) Sample(d, count int, seed uint64, _ kernels.Params) (*mat.Dense, error) {
	c := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: 1, Src: kernels.NewSource(seed)}
	return kernels.Columns(d, count, func(col []float64) {
		for i := range col {
			col[i] = c.Rand()
		}
	}), nil
}

// Eval returns exp(−‖a−b‖₁).
func (Laplacian) Eval(a, b []float64, _ kernels.Params) (float64, error) {
	return math.Exp(-floats.Distance(a, b, 1)), nil
}

// Matérn smoothness limits: ν must be a half-integer in this range so
// that Eval has a closed form.
const (
	MaternMinNu = 0.5
	MaternMaxNu = 10.5
)

// Matern is the Matérn kernel with smoothness ν (parameter "nu") at unit
// lengthscale.
type Matern struct{}

// Info describes the kernel and its parameter nu.
func (Matern) Info() kernels.Info {
	return kernels.Info{Name: "matern", Version: Version,
		Description: "Matern with smoothness nu; frequencies multivariate Student-t with 2nu degrees of freedom",
		Params: []kernels.Param{{
			Name:        "nu",
			Description: fmt.Sprintf("smoothness: a half-integer from %g to %g", MaternMinNu, MaternMaxNu),
			Default:     1.5,
			Values:      []float64{0.5, 1.5, 2.5},
		}},
	}
}

// order returns p for ν = p + 1/2, or an error when ν is not such a
// half-integer within the limits.
func maternOrder(nu float64) (int, error) {
	p := nu - 0.5
	if nu < MaternMinNu || nu > MaternMaxNu || p != math.Trunc(p) {
		return 0, fmt.Errorf("matern nu = %g: want a half-integer from %g to %g: %w", nu, MaternMinNu, MaternMaxNu, kernels.ErrParam)
	}
	return int(p), nil
}

// Sample draws each frequency from the d-variate Student-t with 2ν degrees
// of freedom, zero mean and identity scale.
func (Matern) Sample(d, count int, seed uint64, p kernels.Params) (*mat.Dense, error) {
	nu := p["nu"]
	if _, err := maternOrder(nu); err != nil {
		return nil, err
	}
	eye := mat.NewDiagDense(d, nil)
	for i := 0; i < d; i++ {
		eye.SetDiag(i, 1)
	}
	t, ok := distmv.NewStudentsT(make([]float64, d), eye, 2*nu, kernels.NewSource(seed))
	if !ok {
		return nil, fmt.Errorf("matern: Student-t with %g degrees of freedom: %w", 2*nu, kernels.ErrParam)
	}
	return kernels.Columns(d, count, func(col []float64) { t.Rand(col) }), nil
}

// Eval returns the Matérn kernel at ν = p + 1/2 through the closed form
//
//	k(r) = exp(−√(2ν) r) · p!/(2p)! · Σ_{i=0..p} (p+i)!/(i!(p−i)!) (2√(2ν) r)^{p−i}.
func (Matern) Eval(a, b []float64, p kernels.Params) (float64, error) {
	nu := p["nu"]
	order, err := maternOrder(nu)
	if err != nil {
		return 0, err
	}
	s := math.Sqrt(2*nu) * floats.Distance(a, b, 2)
	var sum float64
	for i := 0; i <= order; i++ {
		sum += fact(order+i) / (fact(i) * fact(order-i)) * math.Pow(2*s, float64(order-i))
	}
	return math.Exp(-s) * fact(order) / fact(2*order) * sum, nil
}

func fact(n int) float64 {
	f := 1.0
	for i := 2; i <= n; i++ {
		f *= float64(i)
	}
	return f
}
