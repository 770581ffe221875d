package privacy

import (
	"errors"
	"fmt"
	"math"
)

// ErrParams reports a parameter outside its domain.
var ErrParams = errors.New("privacy: invalid parameters")

// Orders are the Rényi orders α an Accountant tracks, TensorFlow Privacy's
// defaults: 1.1 to 10.9 by 0.1, 12 to 63, 128, 256 and 512.
var Orders = func() []float64 {
	var o []float64
	for x := 1; x < 100; x++ {
		o = append(o, 1+float64(x)/10)
	}
	for a := 12; a < 64; a++ {
		o = append(o, float64(a))
	}
	return append(o, 128, 256, 512)
}()

// GaussianRDP returns the RDP of order alpha of the Gaussian mechanism of
// noise multiplier sigma: α/(2σ²).
func GaussianRDP(sigma, alpha float64) float64 { return alpha / (2 * sigma * sigma) }

// SubsampledGaussianRDP returns the RDP of order alpha > 1 of the Gaussian
// mechanism of noise multiplier sigma > 0 on a Poisson sample of rate q in
// [0, 1].
func SubsampledGaussianRDP(q, sigma, alpha float64) (float64, error) {
	switch {
	case !(q >= 0 && q <= 1):
		return 0, fmt.Errorf("%w: sampling rate %v not in [0, 1]", ErrParams, q)
	case !(sigma > 0):
		return 0, fmt.Errorf("%w: noise multiplier %v not positive", ErrParams, sigma)
	case !(alpha > 1):
		return 0, fmt.Errorf("%w: order %v not above 1", ErrParams, alpha)
	}
	switch {
	case q == 0:
		return 0, nil
	case q == 1:
		return GaussianRDP(sigma, alpha), nil
	case math.IsInf(alpha, 1):
		return math.Inf(1), nil
	}
	var logA float64
	if alpha == math.Trunc(alpha) {
		logA = logAInt(q, sigma, int(alpha))
	} else {
		logA = logAFrac(q, sigma, alpha)
	}
	return logA / (alpha - 1), nil
}

// logAInt is log A_α for integer α: log Σ_k C(α,k) q^k (1−q)^(α−k) e^((k²−k)/(2σ²)).
func logAInt(q, sigma float64, alpha int) float64 {
	logA := math.Inf(-1)
	for k := 0; k <= alpha; k++ {
		lc := logBinom(float64(alpha), float64(k))
		s := lc + float64(k)*math.Log(q) + float64(alpha-k)*math.Log1p(-q) + float64(k*k-k)/(2*sigma*sigma)
		logA = logAdd(logA, s)
	}
	return logA
}

// logAFrac is log A_α for fractional α, by the series of TensorFlow
// Privacy's _compute_log_a_frac, summed until both terms fall below e^−30.
func logAFrac(q, sigma, alpha float64) float64 {
	a0, a1 := math.Inf(-1), math.Inf(-1)
	z0 := sigma*sigma*math.Log(1/q-1) + 0.5
	coef := 1.0 // the generalised binomial C(α, i), by its recurrence
	for i := 0; ; i++ {
		fi := float64(i)
		j := alpha - fi
		lc := math.Log(math.Abs(coef))
		t0 := lc + fi*math.Log(q) + j*math.Log1p(-q)
		t1 := lc + j*math.Log(q) + fi*math.Log1p(-q)
		e0 := math.Log(0.5) + logErfc((fi-z0)/(math.Sqrt2*sigma))
		e1 := math.Log(0.5) + logErfc((z0-j)/(math.Sqrt2*sigma))
		s0 := t0 + (fi*fi-fi)/(2*sigma*sigma) + e0
		s1 := t1 + (j*j-j)/(2*sigma*sigma) + e1
		if coef > 0 {
			a0, a1 = logAdd(a0, s0), logAdd(a1, s1)
		} else {
			a0, a1 = logSub(a0, s0), logSub(a1, s1)
		}
		if math.Max(s0, s1) < -30 || i > 100000 {
			break
		}
		coef *= (alpha - fi) / (fi + 1)
	}
	return logAdd(a0, a1)
}

func logBinom(n, k float64) float64 {
	a, _ := math.Lgamma(n + 1)
	b, _ := math.Lgamma(k + 1)
	c, _ := math.Lgamma(n - k + 1)
	return a - b - c
}

// logAdd returns log(e^a + e^b).
func logAdd(a, b float64) float64 {
	if math.IsInf(a, -1) {
		return b
	}
	if math.IsInf(b, -1) {
		return a
	}
	hi, lo := math.Max(a, b), math.Min(a, b)
	return hi + math.Log1p(math.Exp(lo-hi))
}

// logSub returns log(e^a − e^b) for a ≥ b; −Inf when they are equal.
func logSub(a, b float64) float64 {
	if math.IsInf(b, -1) {
		return a
	}
	if a <= b {
		return math.Inf(-1)
	}
	return a + math.Log(-math.Expm1(b-a))
}

// logErfc returns log erfc(x), by the asymptotic series where erfc
// underflows.
func logErfc(x float64) float64 {
	if x < 25 {
		return math.Log(math.Erfc(x))
	}
	r := 1 / (x * x)
	return -x*x - math.Log(x) - 0.5*math.Log(math.Pi) + math.Log(1-r/2+3*r*r/4-15*r*r*r/8+105*r*r*r*r/16)
}

// Accountant composes steps of the (subsampled) Gaussian mechanism: its
// RDP at every order of Orders is the sum of the steps'. The zero value
// has spent nothing.
type Accountant struct {
	// RDP is the composed RDP at Orders[i]; nil before the first Add.
	RDP []float64
}

// Add composes steps steps of sampling rate q and noise multiplier sigma.
func (a *Accountant) Add(q, sigma float64, steps int) error {
	if steps < 0 {
		return fmt.Errorf("%w: %d steps", ErrParams, steps)
	}
	if a.RDP == nil {
		a.RDP = make([]float64, len(Orders))
	}
	for i, o := range Orders {
		r, err := SubsampledGaussianRDP(q, sigma, o)
		if err != nil {
			return err
		}
		a.RDP[i] += float64(steps) * r
	}
	return nil
}

// Epsilon returns the ε of the composed steps at delta in (0, 1), and the
// order that attains it: min over α of
// rdp + log((α−1)/α) − (log δ + log α)/(α−1), at least 0.
func (a *Accountant) Epsilon(delta float64) (eps, order float64, err error) {
	if !(delta > 0 && delta < 1) {
		return 0, 0, fmt.Errorf("%w: δ %v not in (0, 1)", ErrParams, delta)
	}
	if a.RDP == nil {
		return 0, 0, nil
	}
	eps, order = math.Inf(1), 0
	for i, o := range Orders {
		r := a.RDP[i]
		var e float64
		switch {
		case delta*delta+math.Expm1(-r) >= 0:
			e = 0 // δ ≥ √(1−e^−r) bounds the divergence outright
		case o > 1.01:
			e = r + math.Log1p(-1/o) - (math.Log(delta)+math.Log(o))/(o-1)
		default:
			continue
		}
		if e < eps {
			eps, order = e, o
		}
	}
	return math.Max(0, eps), order, nil
}

// Calibrate returns the smallest noise multiplier, to a relative precision
// of 1e-4, at which steps steps of sampling rate q spend at most eps at
// delta.
func Calibrate(eps, delta, q float64, steps int) (float64, error) {
	switch {
	case !(eps > 0) || math.IsInf(eps, 1):
		return 0, fmt.Errorf("%w: ε %v not positive and finite", ErrParams, eps)
	case !(delta > 0 && delta < 1):
		return 0, fmt.Errorf("%w: δ %v not in (0, 1)", ErrParams, delta)
	case !(q > 0 && q <= 1):
		return 0, fmt.Errorf("%w: sampling rate %v not in (0, 1]", ErrParams, q)
	case steps < 1:
		return 0, fmt.Errorf("%w: %d steps", ErrParams, steps)
	}
	spent := func(sigma float64) (float64, error) {
		var a Accountant
		if err := a.Add(q, sigma, steps); err != nil {
			return 0, err
		}
		e, _, err := a.Epsilon(delta)
		return e, err
	}
	lo, hi := 1e-3, 1.0
	for {
		e, err := spent(hi)
		if err != nil {
			return 0, err
		}
		if e <= eps {
			break
		}
		lo, hi = hi, 2*hi
		if hi > 1e12 {
			return 0, fmt.Errorf("%w: no noise multiplier below 1e12 spends ε %v over %d steps", ErrParams, eps, steps)
		}
	}
	for hi-lo > 1e-4*hi {
		mid := (lo + hi) / 2
		e, err := spent(mid)
		if err != nil {
			return 0, err
		}
		if e <= eps {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}
