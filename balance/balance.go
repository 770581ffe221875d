package balance

import (
	"context"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/positivity"
)

// Arm indices of the per-arm fields of [Sums].
const (
	Control = 0
	Treated = 1
)

// Threshold is the |SMD| above which a covariate counts as imbalanced: the
// 0.1 of Austin (2009) and cobalt's default.
const Threshold = 0.1

// ErrShape means that the inputs' lengths or a Sums vector's length do not
// agree.
var ErrShape = errors.New("balance: shapes differ")

// Sums are the sufficient statistics of the balance diagnostics of one or
// more sites. Index 0 of each pair is the control arm, 1 the treated arm.
type Sums struct {
	N       [2]float64   // rows
	W       [2]float64   // Σω, the sum of the ATE weights
	WW      [2]float64   // Σω², for the effective sample size
	Outside [2]float64   // rows whose propensity is outside positivity's bounds (positivity.IsOutside)
	Sum     [2][]float64 // per covariate Σx
	SumSq   [2][]float64 // per covariate Σx²
	WSum    [2][]float64 // per covariate Σωx
}

// Dim returns the number of covariates.
func (s Sums) Dim() int { return len(s.Sum[0]) }

// newSums returns zero Sums of d covariates.
func newSums(d int) Sums {
	var s Sums
	for a := range 2 {
		s.Sum[a], s.SumSq[a], s.WSum[a] = make([]float64, d), make([]float64, d), make([]float64, d)
	}
	return s
}

// Of returns the Sums of the rows of x (raw covariates) with treatments w,
// weighted by a logistic propensity fitted on them (Propensity).
func Of(ctx context.Context, x mat.Matrix, w []float64) (Sums, error) {
	e, err := Propensity(ctx, x, w)
	if err != nil {
		return Sums{}, err
	}
	return Collect(x, w, e)
}

// Collect returns the Sums of the n rows of x (n×d, raw covariates) with
// treatments w (0 or 1) and propensities e (each in (0, 1)). A row counts
// in Outside when its propensity is outside positivity's bounds, those the
// verdict reports against (positivity.IsOutside).
func Collect(x mat.Matrix, w, e []float64) (Sums, error) {
	n, d := x.Dims()
	if len(w) != n || len(e) != n {
		return Sums{}, fmt.Errorf("%w: %d rows of covariates, %d treatments, %d propensities", ErrShape, n, len(w), len(e))
	}
	s := newSums(d)
	for i := range n {
		var a int
		var om float64
		switch {
		case w[i] == 1 && e[i] > 0 && e[i] <= 1:
			a, om = Treated, 1/e[i]
		case w[i] == 0 && e[i] >= 0 && e[i] < 1:
			a, om = Control, 1/(1-e[i])
		default:
			return Sums{}, fmt.Errorf("balance: row %d: treatment %v with propensity %v", i, w[i], e[i])
		}
		s.N[a]++
		s.W[a] += om
		s.WW[a] += om * om
		if positivity.IsOutside(e[i]) {
			s.Outside[a]++
		}
		for j := range d {
			v := x.At(i, j)
			s.Sum[a][j] += v
			s.SumSq[a][j] += v * v
			s.WSum[a][j] += om * v
		}
	}
	return s, nil
}

// Add adds o to s: the Sums of the union of two sets of rows.
func (s *Sums) Add(o Sums) error {
	if s.Dim() != o.Dim() {
		return fmt.Errorf("%w: %d and %d covariates", ErrShape, s.Dim(), o.Dim())
	}
	for a := range 2 {
		s.N[a] += o.N[a]
		s.W[a] += o.W[a]
		s.WW[a] += o.WW[a]
		s.Outside[a] += o.Outside[a]
		for j := range s.Sum[a] {
			s.Sum[a][j] += o.Sum[a][j]
			s.SumSq[a][j] += o.SumSq[a][j]
			s.WSum[a][j] += o.WSum[a][j]
		}
	}
	return nil
}

// Vector returns s as one vector of 8 + 6d numbers, the form in which a
// site sends it: N, W, WW and Outside of both arms, then per arm Sum,
// SumSq and WSum.
func (s Sums) Vector() []float64 {
	d := s.Dim()
	v := make([]float64, 0, 8+6*d)
	for a := range 2 {
		v = append(v, s.N[a], s.W[a], s.WW[a], s.Outside[a])
	}
	for a := range 2 {
		v = append(v, s.Sum[a]...)
		v = append(v, s.SumSq[a]...)
		v = append(v, s.WSum[a]...)
	}
	return v
}

// FromVector is the inverse of [Sums.Vector] for d covariates. It checks
// what it can of the numbers, which come from another process: finite,
// counts whole and not negative, weights at least the counts.
func FromVector(d int, v []float64) (Sums, error) {
	if d < 0 || len(v) != 8+6*d {
		return Sums{}, fmt.Errorf("%w: %d numbers for %d covariates, want %d", ErrShape, len(v), d, 8+6*d)
	}
	for i, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return Sums{}, fmt.Errorf("balance: number %d of the sums is %v", i, x)
		}
	}
	s := newSums(d)
	for a := range 2 {
		k := 4 * a
		s.N[a], s.W[a], s.WW[a], s.Outside[a] = v[k], v[k+1], v[k+2], v[k+3]
		if s.N[a] < 0 || s.N[a] != math.Trunc(s.N[a]) || s.Outside[a] < 0 || s.Outside[a] > s.N[a] || s.W[a] < s.N[a] || s.WW[a] < 0 {
			return Sums{}, fmt.Errorf("balance: counts of arm %d are inconsistent (rows %v, outside %v, Σω %v)", a, s.N[a], s.Outside[a], s.W[a])
		}
	}
	off := 8
	for a := range 2 {
		copy(s.Sum[a], v[off:off+d])
		copy(s.SumSq[a], v[off+d:off+2*d])
		copy(s.WSum[a], v[off+2*d:off+3*d])
		off += 3 * d
	}
	return s, nil
}
