package inference

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/crffd/crffd/internal/mapped"
)

// DefaultClip is the η to which propensities are clipped, [η, 1 − η],
// before they divide a residual.
const DefaultClip = 0.01

// Level is the coverage of the intervals Estimate reports.
const Level = 0.95

// ErrInput reports predictions, treatments or outcomes that cannot give an
// estimate: mismatched lengths, a treatment other than 0 or 1, a value that
// is not finite, or too few rows.
var ErrInput = errors.New("inference: invalid input")

// Nuisance holds the per-row predictions of the nuisance models, each fitted
// on rows other than the one predicted: the propensity ê(x) = P(w = 1 | x)
// and the outcome means μ̂0(x) = E[y | x, w = 0] and μ̂1(x) = E[y | x, w = 1],
// in the outcome's own units (probabilities for a binary outcome).
type Nuisance struct {
	Propensity []float64
	Mu0, Mu1   []float64
	// Stack, when not nil, says how the predictions were combined from
	// candidate learners.
	Stack *Stack
}

// Stack records a super learner's choice of nuisance models: for the
// propensity and for each arm's outcome mean, the convex weights of its
// candidate learners, chosen by their cross-validated losses.
type Stack struct {
	Learners []string       // the candidates, in the order of each model's slices
	Models   []StackedModel // StackPropensity, StackMu0, StackMu1
}

// Names of a Stack's models.
const (
	StackPropensity = "propensity" // ê(x), its loss the log loss over every row
	// StackMu0 and StackMu1 are the outcome means μ̂0(x) and μ̂1(x), their
	// losses the squared error (log loss for a binary outcome) over the
	// rows of their arm.
	StackMu0 = "mu0"
	StackMu1 = "mu1"
)

// StackedModel is a Stack's choice for one nuisance model.
type StackedModel struct {
	Name    string
	Weights []float64 // each learner's weight; they sum to one
	// Loss is each learner's mean cross-validated loss, then the stack's
	// (one more number), over the same N rows.
	Loss []float64
	N    int
}

// Model returns the stacked model of that name, or nil.
func (s *Stack) Model(name string) *StackedModel {
	for i := range s.Models {
		if s.Models[i].Name == name {
			return &s.Models[i]
		}
	}
	return nil
}

// Len returns the number of rows, or −1 when the slices differ in length.
func (nu Nuisance) Len() int {
	n := len(nu.Propensity)
	if len(nu.Mu0) != n || len(nu.Mu1) != n {
		return -1
	}
	return n
}

// ControlScores returns the rows' doubly robust scores of the control
// arm, Γ0_i = μ̂0 + (1 − w)(y − μ̂0)/(1 − ê), ê clipped as Scores clips it:
// their mean is the AIPW estimate of the mean outcome under no treatment,
// and Γ0 + ψ is the treated arm's score. Scores checks what it reads.
func ControlScores(w, y []float64, nu Nuisance, clip float64) ([]float64, error) {
	n := nu.Len()
	if n < 0 || len(w) != n || len(y) != n || !(clip >= 0 && clip < 0.5) {
		return nil, fmt.Errorf("%w: %d treatments, %d outcomes and %d rows of nuisances, clip %v", ErrInput, len(w), len(y), n, clip)
	}
	out := mapped.Large(n)
	for i := range n {
		e := min(max(nu.Propensity[i], clip), 1-clip)
		out[i] = nu.Mu0[i]
		if w[i] == 0 {
			out[i] += (y[i] - nu.Mu0[i]) / (1 - e)
		}
	}
	return out, nil
}

// Scores returns ψ_i for every row, with the propensity clipped to
// [clip, 1 − clip], and the number of rows whose propensity was clipped.
// clip must lie in [0, ½).
func Scores(w, y []float64, nu Nuisance, clip float64) (psi []float64, clipped int, err error) {
	n := nu.Len()
	switch {
	case n < 0 || len(w) != n || len(y) != n:
		return nil, 0, fmt.Errorf("%w: %d treatments, %d outcomes, %d propensities, %d and %d outcome means",
			ErrInput, len(w), len(y), len(nu.Propensity), len(nu.Mu0), len(nu.Mu1))
	case !(clip >= 0 && clip < 0.5):
		return nil, 0, fmt.Errorf("%w: clip %v outside [0, 0.5)", ErrInput, clip)
	}
	psi = mapped.Large(n)
	for i := range n {
		e, m0, m1 := nu.Propensity[i], nu.Mu0[i], nu.Mu1[i]
		if !finite(e) || e < 0 || e > 1 || !finite(m0) || !finite(m1) || !finite(y[i]) {
			// The outcome is a record value: the error says only whether
			// it is finite.
			return nil, 0, fmt.Errorf("%w: row %d: propensity %v, outcome means %v and %v, outcome finite %v", ErrInput, i, e, m0, m1, finite(y[i]))
		}
		if IsClipped(e, clip) {
			e = min(max(e, clip), 1-clip)
			clipped++
		}
		switch w[i] {
		case 1:
			psi[i] = m1 - m0 + (y[i]-m1)/e
		case 0:
			psi[i] = m1 - m0 - (y[i]-m0)/(1-e)
		default:
			return nil, 0, fmt.Errorf("%w: row %d: treatment is not 0 or 1", ErrInput, i)
		}
		if !finite(psi[i]) {
			return nil, 0, fmt.Errorf("%w: row %d: score is %v", ErrInput, i, psi[i])
		}
	}
	return psi, clipped, nil
}

// IsClipped reports whether Scores clips the propensity e to
// [clip, 1 − clip].
func IsClipped(e, clip float64) bool { return e < clip || e > 1-clip }

// Sums are what a site shares of its scores: their count, sum and sum of
// squares. They add over disjoint sets of rows.
//
// A differentially private site adds noise to Sum before it shares it;
// NoiseVar is the variance of that noise (zero for exact sums), which is
// public: it follows from the site's noise multiplier and clip bound, not
// from its rows. Added Sums add their noise variances, and Estimate counts
// them in the standard error.
type Sums struct {
	N        int
	Sum      float64
	SumSq    float64
	NoiseVar float64
}

// Accumulate returns the Sums of v.
func Accumulate(v []float64) Sums {
	s := Sums{N: len(v)}
	for _, x := range v {
		s.Sum += x
		s.SumSq += x * x
	}
	return s
}

// Add returns the Sums of the union of the rows of s and t.
func (s Sums) Add(t Sums) Sums {
	return Sums{N: s.N + t.N, Sum: s.Sum + t.Sum, SumSq: s.SumSq + t.SumSq, NoiseVar: s.NoiseVar + t.NoiseVar}
}

// Estimate is an effect estimate with its standard error and the Level
// interval Lower..Upper, over N rows.
type Estimate struct {
	Estimate     float64
	SE           float64
	Lower, Upper float64
	N            int
	// NoiseSE is the part of SE that differential-privacy noise in the
	// sums accounts for, SE² = sd(ψ)²/n + NoiseSE²; zero for exact sums.
	NoiseSE float64
}

// Estimate returns the mean of the scores with the standard error
// sd(ψ)/√n, sd with the n − 1 divisor, and the normal interval at Level.
// Noise in Sum (NoiseVar) moves the mean by a further error of variance
// NoiseVar/n², independent of the scores, so the standard error is
// √(sd(ψ)²/n + NoiseVar/n²). It needs at least two rows.
func (s Sums) Estimate() (Estimate, error) {
	if s.N < 2 {
		return Estimate{}, fmt.Errorf("%w: %d rows; an interval needs at least 2", ErrInput, s.N)
	}
	if !finite(s.Sum) || !finite(s.SumSq) || !finite(s.NoiseVar) || s.NoiseVar < 0 {
		return Estimate{}, fmt.Errorf("%w: sums %v and %v, noise variance %v", ErrInput, s.Sum, s.SumSq, s.NoiseVar)
	}
	n := float64(s.N)
	mean := s.Sum / n
	v := max(0, (s.SumSq-n*mean*mean)/(n-1))
	noise := s.NoiseVar / (n * n)
	e := NewEstimate(mean, math.Sqrt(v/n+noise), s.N)
	e.NoiseSE = math.Sqrt(noise)
	return e, nil
}

// Stratified returns the mean of the scores of every stratum (a site's
// rows) with the stratified standard error: the sites' sizes are fixed by
// design, not drawn, so the spread between their means is no part of the
// estimate's error. With n_k, Σψ_k and Σψ²_k of stratum k, N their total
// and K the strata with rows,
//
//	se² = Σ_k (Σψ²_k − (Σψ_k)²/n_k) / (N(N − K)) + Σ_k NoiseVar_k / N²,
//
// where a private stratum's noised Σψ_k adds NoiseVar_k to (Σψ_k)² on
// average, which is taken out of its within-stratum sum of squares. The
// pooled Sums' Estimate, which also counts the spread between the strata's
// means, is conservative when they differ. It needs more rows than strata.
func Stratified(strata []Sums) (Estimate, error) {
	var total Sums
	var within float64
	k := 0
	for i, s := range strata {
		if s.N < 0 || !finite(s.Sum) || !finite(s.SumSq) || !finite(s.NoiseVar) || s.NoiseVar < 0 {
			return Estimate{}, fmt.Errorf("%w: stratum %d: %d rows, sums %v and %v, noise variance %v", ErrInput, i, s.N, s.Sum, s.SumSq, s.NoiseVar)
		}
		if s.N == 0 {
			continue
		}
		k++
		n := float64(s.N)
		within += max(0, s.SumSq-(s.Sum*s.Sum-s.NoiseVar)/n)
		total = total.Add(s)
	}
	if total.N <= k || total.N < 2 {
		return Estimate{}, fmt.Errorf("%w: %d rows in %d strata; an interval needs more rows than strata", ErrInput, total.N, k)
	}
	n := float64(total.N)
	noise := total.NoiseVar / (n * n)
	e := NewEstimate(total.Sum/n, math.Sqrt(within/(n*(n-float64(k)))+noise), total.N)
	e.NoiseSE = math.Sqrt(noise)
	return e, nil
}

// z is the normal quantile of the Level interval.
var z = distuv.UnitNormal.Quantile(0.5 + Level/2)

// NewEstimate returns the estimate mean with standard error se over n
// rows and its normal Level interval.
func NewEstimate(mean, se float64, n int) Estimate {
	return Estimate{Estimate: mean, SE: se, Lower: mean - z*se, Upper: mean + z*se, N: n}
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// PlugIn returns the mean of the per-row effects cate, the plug-in ATE.
// It carries no standard error: the spread of the CATEs over the rows says
// nothing about how far their mean is from the truth, so SE, Lower and
// Upper are NaN.
func PlugIn(cate []float64) (Estimate, error) {
	if len(cate) == 0 {
		return Estimate{}, fmt.Errorf("%w: no effects to average", ErrInput)
	}
	var s float64
	for i, v := range cate {
		if !finite(v) {
			return Estimate{}, fmt.Errorf("%w: effect %d is %v", ErrInput, i, v)
		}
		s += v
	}
	return PointEstimate(s/float64(len(cate)), len(cate)), nil
}

// PointEstimate returns the estimate v over n rows without a standard
// error: SE, Lower and Upper are NaN.
func PointEstimate(v float64, n int) Estimate {
	nan := math.NaN()
	return Estimate{Estimate: v, SE: nan, Lower: nan, Upper: nan, N: n}
}

// ATEs are the average treatment effects of one scope (a site's rows, or
// every site's): the AIPW estimate with its standard error and interval,
// the number of rows whose propensity was clipped in it, and the plug-in
// mean of the CausalRFF CATEs, which has no standard error.
type ATEs struct {
	AIPW    Estimate
	Clipped int
	PlugIn  Estimate
}

// Analysis is what a site computes from its rows' cross-fitted nuisances:
// the AIPW estimate with the Sums it shares and the number of rows whose
// propensity was clipped (to DefaultClip), and the Calibration of its
// CATEs, nil when the site has too few rows for one (no more than the
// covariates plus one).
type Analysis struct {
	AIPW        Estimate
	Sums        Sums
	Clipped     int
	Calibration *Calibration
	// Scores are the rows' ψ_i and ClippedRows whether each row's
	// propensity was clipped: a site keeps them beside its CATEs, so that
	// the AIPW estimate can be recomputed as rows come and go.
	Scores      []float64
	ClippedRows []bool
	// Stack is the nuisances' Stack, when they came from a super learner.
	Stack *Stack
	// Control are the rows' control-arm scores Γ0 (ControlScores), the
	// value of treating no one, which a policy's value starts from.
	Control []float64
}

// Analyse computes the Analysis of rows with treatments w, outcomes y,
// cross-fitted nuisances nu, CATE estimates cate and covariates x (the
// rows of x; nil x skips the calibration).
func Analyse(w, y []float64, nu Nuisance, cate []float64, x mat.Matrix) (*Analysis, error) {
	psi, clipped, err := Scores(w, y, nu, DefaultClip)
	if err != nil {
		return nil, err
	}
	control, err := ControlScores(w, y, nu, DefaultClip)
	if err != nil {
		return nil, err
	}
	a := &Analysis{Sums: Accumulate(psi), Clipped: clipped, Scores: psi, ClippedRows: make([]bool, len(psi)), Stack: nu.Stack, Control: control}
	for i, e := range nu.Propensity {
		a.ClippedRows[i] = IsClipped(e, DefaultClip)
	}
	if a.AIPW, err = a.Sums.Estimate(); err != nil {
		return nil, err
	}
	if x == nil {
		return a, nil
	}
	if n, d := x.Dims(); n <= d+1 {
		return a, nil
	}
	if a.Calibration, err = FitCalibration(psi, cate, x); err != nil {
		return nil, err
	}
	return a, nil
}
