package heterogeneity

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/crffd/crffd/inference"
)

// ErrInput reports inputs the statistics cannot be computed from: lengths
// that differ, values that are not finite, too few rows.
var ErrInput = errors.New("heterogeneity: invalid input")

// BLPSums are the sums of a set of rows from which the BLP regression and
// its robust covariance follow: with d = τ̂ − Shift, the power sums of d
// up to the fourth, of ψ·d up to the third and of ψ²·d up to the second.
// Sums of rows with the same Shift add (Add).
type BLPSums struct {
	N     int
	Shift float64    // subtracted from τ̂ before the powers are taken
	D     [5]float64 // Σ d^k, k = 0..4 (D[0] = N)
	PD    [4]float64 // Σ ψ·d^k, k = 0..3
	P2D   [3]float64 // Σ ψ²·d^k, k = 0..2
}

// NewBLPSums returns the sums of rows with scores psi and estimates cate,
// taken about shift (any value near the mean of cate keeps them exact).
func NewBLPSums(psi, cate []float64, shift float64) (BLPSums, error) {
	if len(psi) != len(cate) {
		return BLPSums{}, fmt.Errorf("%w: %d scores and %d estimates", ErrInput, len(psi), len(cate))
	}
	s := BLPSums{N: len(psi), Shift: shift}
	for i, p := range psi {
		if !finite(p) || !finite(cate[i]) {
			return BLPSums{}, fmt.Errorf("%w: row %d: score %v, estimate %v", ErrInput, i, p, cate[i])
		}
		d := cate[i] - shift
		dk := 1.0
		for k := range 5 {
			s.D[k] += dk
			if k < 4 {
				s.PD[k] += p * dk
			}
			if k < 3 {
				s.P2D[k] += p * p * dk
			}
			dk *= d
		}
	}
	return s, nil
}

// About returns the sums of the rows of s taken about shift instead:
// with δ = s.Shift − shift, Σ(d + δ)^k expands into the sums of s.
func (s BLPSums) About(shift float64) BLPSums {
	out := BLPSums{N: s.N, Shift: shift}
	delta := s.Shift - shift
	// binom[k][j] = C(k, j) δ^(k−j).
	var pow [5]float64
	pow[0] = 1
	for k := 1; k < 5; k++ {
		pow[k] = pow[k-1] * delta
	}
	choose := [5][5]float64{{1}, {1, 1}, {1, 2, 1}, {1, 3, 3, 1}, {1, 4, 6, 4, 1}}
	for k := range 5 {
		for j := 0; j <= k; j++ {
			c := choose[k][j] * pow[k-j]
			out.D[k] += c * s.D[j]
			if k < 4 {
				out.PD[k] += c * s.PD[j]
			}
			if k < 3 {
				out.P2D[k] += c * s.P2D[j]
			}
		}
	}
	return out
}

// Pool returns the sums of the rows of every one of sums, taken about
// the row-weighted mean of their shifts (About): sites' sums, each about
// its own mean τ̂, pool into sums about one near the pooled mean.
func Pool(sums []BLPSums) (BLPSums, error) {
	var n int
	var shift float64
	for _, s := range sums {
		n += s.N
	}
	if n == 0 {
		return BLPSums{}, fmt.Errorf("%w: no rows", ErrInput)
	}
	for _, s := range sums {
		shift += float64(s.N) / float64(n) * s.Shift
	}
	out := BLPSums{Shift: shift}
	for _, s := range sums {
		var err error
		if out, err = out.Add(s.About(shift)); err != nil {
			return BLPSums{}, err
		}
	}
	return out, nil
}

// Add returns the sums of the rows of s and t, which must share a shift.
func (s BLPSums) Add(t BLPSums) (BLPSums, error) {
	if s.N == 0 {
		return t, nil
	}
	if t.N == 0 {
		return s, nil
	}
	if s.Shift != t.Shift {
		return BLPSums{}, fmt.Errorf("%w: sums about %v and %v", ErrInput, s.Shift, t.Shift)
	}
	s.N += t.N
	for k := range s.D {
		s.D[k] += t.D[k]
	}
	for k := range s.PD {
		s.PD[k] += t.PD[k]
	}
	for k := range s.P2D {
		s.P2D[k] += t.P2D[k]
	}
	return s, nil
}

// BLP is the best linear predictor's fit: ATE (β1, at the rows' mean τ̂)
// and Het (β2, the loading on τ̂ − τ̄), with two-sided normal intervals,
// and the one-sided p-value of β2 > 0.
type BLP struct {
	ATE, Het inference.Estimate
	HetP     float64
}

// BLP returns the regression of ψ on [1, τ̂ − τ̄] over the rows of s with
// HC1 standard errors. It needs at least three rows and τ̂ that varies.
func (s BLPSums) BLP() (BLP, error) {
	n := float64(s.N)
	if s.N < 3 {
		return BLP{}, fmt.Errorf("%w: %d rows; the BLP needs at least 3", ErrInput, s.N)
	}
	// Centre at the mean m of d: c = d − m. Σc^k from Σd^k.
	m := s.D[1] / n
	c2 := s.D[2] - n*m*m
	c3 := s.D[3] - 3*m*s.D[2] + 2*n*m*m*m
	c4 := s.D[4] - 4*m*s.D[3] + 6*m*m*s.D[2] - 3*n*m*m*m*m
	pc0 := s.PD[0]
	pc1 := s.PD[1] - m*s.PD[0]
	pc2 := s.PD[2] - 2*m*s.PD[1] + m*m*s.PD[0]
	pc3 := s.PD[3] - 3*m*s.PD[2] + 3*m*m*s.PD[1] - m*m*m*s.PD[0]
	p2c0 := s.P2D[0]
	p2c1 := s.P2D[1] - m*s.P2D[0]
	p2c2 := s.P2D[2] - 2*m*s.P2D[1] + m*m*s.P2D[0]
	if !(c2 > 1e-12*n*(1+m*m)) {
		return BLP{}, fmt.Errorf("%w: τ̂ does not vary over the %d rows", ErrInput, s.N)
	}
	// With centred regressors the normal matrix is diag(n, Σc²).
	b1 := pc0 / n
	b2 := pc1 / c2
	// The meat Σ e² [1 c; c c²], e = ψ − b1 − b2·c, expanded in the sums:
	// Σ e²c^k = Σψ²c^k − 2b1Σψc^k − 2b2Σψc^{k+1} + b1²Σc^k + 2b1b2Σc^{k+1} + b2²Σc^{k+2}.
	p2 := [3]float64{p2c0, p2c1, p2c2}
	p1 := [4]float64{pc0, pc1, pc2, pc3}
	ck := [5]float64{n, 0, c2, c3, c4}
	meat := func(k int) float64 {
		return p2[k] - 2*b1*p1[k] - 2*b2*p1[k+1] + b1*b1*ck[k] + 2*b1*b2*ck[k+1] + b2*b2*ck[k+2]
	}
	// The bread is diag(1/n, 1/Σc²), so each coefficient's variance needs
	// its own diagonal entry of the meat alone.
	m00, m11 := meat(0), meat(2)
	f := n / (n - 2)
	v1 := f * m00 / (n * n)
	v2 := f * m11 / (c2 * c2)
	if !finite(v1) || !finite(v2) {
		return BLP{}, fmt.Errorf("%w: sums that are not finite", ErrInput)
	}
	out := BLP{ATE: estimate(b1, math.Sqrt(max(0, v1)), s.N), Het: estimate(b2, math.Sqrt(max(0, v2)), s.N)}
	out.HetP = 1
	if se := out.Het.SE; se > 0 {
		out.HetP = distuv.UnitNormal.Survival(b2 / se)
	}
	return out, nil
}

func estimate(mean, se float64, n int) inference.Estimate { return inference.NewEstimate(mean, se, n) }

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
