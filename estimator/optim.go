package estimator

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/optimize"
)

// stepper is an optimiser driven one evaluation (one federated round) at a
// time: the coordinator evaluates J and ∇J at point() and passes them to
// tell, which moves point() or reports that the run has finished.
type stepper interface {
	point() []float64
	tell(f float64, g []float64) (done bool, err error)
	result() (x []float64, f float64)
	fixedNoise() bool
	save(cp *Checkpoint)
}

// Iterate is an accepted point of an L-BFGS run.
type Iterate struct {
	X, Gradient []float64
	F           float64
	Round       int // rounds spent when it was accepted
}

// adam is Adam (Kingma and Ba) with the usual β1 = 0.9, β2 = 0.999.
type adam struct {
	x, m, v []float64
	step    int
	max     int
	lr      float64
	lastF   float64
	params  adamParams // of the current step; adamAVX reads it by pointer
}

const (
	adamBeta1 = 0.9
	adamBeta2 = 0.999
	adamEps   = 1e-8
)

func newAdam(x0 []float64, lr float64, max int) *adam {
	return &adam{x: x0, m: make([]float64, len(x0)), v: make([]float64, len(x0)), lr: lr, max: max}
}

func (a *adam) point() []float64 { return a.x }
func (a *adam) fixedNoise() bool { return false }

func (a *adam) tell(f float64, g []float64) (bool, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return true, errors.New("estimator: objective is not finite")
	}
	a.step++
	a.lastF = f
	p := &a.params
	*p = adamParams{
		beta1: adamBeta1, beta1c: 1 - adamBeta1,
		beta2: adamBeta2, beta2c: 1 - adamBeta2,
		lr: a.lr, eps: adamEps,
		c1: 1 - math.Pow(adamBeta1, float64(a.step)),
		c2: 1 - math.Pow(adamBeta2, float64(a.step)),
	}
	parallelRange(len(g), parallelGrain, 8, func(lo, hi int) {
		adamKernel(a.x[lo:hi], a.m[lo:hi], a.v[lo:hi], g[lo:hi], p)
	})
	return a.step >= a.max, nil
}

// adamParams are the constants of one Adam step, laid out for adamAVX:
// the decay rates and their complements, the learning rate, the bias
// corrections c1 = 1−β1^t and c2 = 1−β2^t, and ε.
type adamParams struct {
	beta1, beta1c, beta2, beta2c float64
	lr, c1, c2, eps              float64
}

// adamKernel applies one Adam step to x, m and v from the gradient g: adamGo
// or a vector version of it with identical rounding.
var adamKernel = adamGo

// adamGo is the Adam update of Kingma and Ba, elementwise:
//
//	m ← β1·m + (1−β1)·g,  v ← β2·v + (1−β2)·g²,  x ← x − lr·(m/c1)/(√(v/c2) + ε).
//
// The float64 conversions forbid fused multiply-adds, as in kernelGo.
func adamGo(x, m, v, g []float64, p *adamParams) {
	n := len(x)
	m, v, g = m[:n], v[:n], g[:n]
	for i, gi := range g {
		mi := float64(p.beta1*m[i]) + float64(p.beta1c*gi)
		vi := float64(p.beta2*v[i]) + float64(float64(p.beta2c*gi)*gi)
		m[i], v[i] = mi, vi
		x[i] -= p.lr * (mi / p.c1) / (math.Sqrt(vi/p.c2) + p.eps)
	}
}

// result returns the last point. Its objective was not evaluated; the
// value returned is that of the point before the last step.
func (a *adam) result() ([]float64, float64) { return a.x, a.lastF }

func (a *adam) save(cp *Checkpoint) {
	cp.X = append([]float64(nil), a.x...)
	cp.M = append([]float64(nil), a.m...)
	cp.V = append([]float64(nil), a.v...)
	cp.Step = a.step
	cp.MaxRounds = a.max
}

// resumeDirectioner lets a restored L-BFGS continue from a replayed history:
// the first InitDirection after a restore is an ordinary NextDirection.
type resumeDirectioner struct {
	*optimize.LBFGS
	resumed bool
}

func (r *resumeDirectioner) InitDirection(loc *optimize.Location, dir []float64) float64 {
	if r.resumed {
		r.resumed = false
		return r.LBFGS.NextDirection(loc, dir)
	}
	return r.LBFGS.InitDirection(loc, dir)
}

// stationaryTol bounds, relative to max(1, |J|), the largest gradient
// element of an iterate from which a line search that makes no progress
// counts as converged.
const stationaryTol = 1e-4

// stationary reports whether it is a stationary point within stationaryTol.
func stationary(it Iterate) bool {
	return infNorm(it.Gradient) <= stationaryTol*math.Max(1, math.Abs(it.F))
}

// infNorm returns ‖v‖∞, and 0 for an empty v.
func infNorm(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return floats.Norm(v, math.Inf(1))
}

// ErrLineSearch reports an L-BFGS fit whose line search failed before the
// fit converged.
var ErrLineSearch = errors.New("estimator: L-BFGS line search failed")

// lbfgs drives gonum's LBFGS direction and Moré–Thuente line search through
// optimize.LinesearchMethod one evaluation at a time, which is what gonum's
// Minimize does internally, but with the loop turned inside out so that each
// evaluation can be a network round.
type lbfgs struct {
	ls      *optimize.LinesearchMethod
	dir     *resumeDirectioner
	loc     *optimize.Location
	started bool
	evals   int
	max     int
	tol     float64
	stall   int
	store   int
	hist    []Iterate // accepted iterates, oldest first, at most store+1
	lastX   []float64 // point of the last evaluation and its values, so that
	lastF   float64   // a request for a gradient already known costs no round
	lastG   []float64
}

// stallIterations is how many consecutive accepted iterations with a
// relative improvement below the tolerance end an L-BFGS run.
const stallIterations = 10

func newLBFGS(x0 []float64, store, max int, tol float64) *lbfgs {
	dir := &resumeDirectioner{LBFGS: &optimize.LBFGS{Store: store}}
	n := len(x0)
	return &lbfgs{
		ls:    &optimize.LinesearchMethod{NextDirectioner: dir, Linesearcher: &optimize.MoreThuente{}},
		dir:   dir,
		loc:   &optimize.Location{X: x0, Gradient: make([]float64, n)},
		max:   max,
		tol:   tol,
		store: store,
		lastX: make([]float64, n),
		lastG: make([]float64, n),
	}
}

func (l *lbfgs) point() []float64 { return l.loc.X }
func (l *lbfgs) fixedNoise() bool { return true }

func (l *lbfgs) tell(f float64, g []float64) (bool, error) {
	l.evals++
	if math.IsNaN(f) {
		f = math.Inf(1)
	}
	copy(l.lastX, l.loc.X)
	l.lastF = f
	copy(l.lastG, g)
	l.loc.F = f
	copy(l.loc.Gradient, g)
	var (
		op  optimize.Operation
		err error
	)
	if !l.started {
		if math.IsInf(f, 0) {
			return true, errors.New("estimator: objective is not finite at the starting point")
		}
		l.started = true
		l.accept()
		op, err = l.ls.Init(l.loc)
	} else {
		op, err = l.ls.Iterate(l.loc)
	}
	for {
		if err != nil {
			last := l.hist[len(l.hist)-1]
			if stationary(last) {
				// A line search that fails from a stationary point (no
				// progress, or no step meeting its conditions) fails for
				// want of precision in the objective: the last accepted
				// iterate is the answer.
				return true, nil
			}
			// It failed from a point that is not stationary (too many
			// steps, a bound, a direction that does not descend): the fit
			// has not converged, and saying so beats publishing its last
			// accepted iterate as an answer.
			return true, fmt.Errorf("%w: %w (largest gradient element %.3g, objective %.6g)", ErrLineSearch, err, infNorm(last.Gradient), last.F)
		}
		switch {
		case op == optimize.MajorIteration:
			if l.accept() {
				return true, nil
			}
			op, err = l.ls.Iterate(l.loc)
		case op&(optimize.FuncEvaluation|optimize.GradEvaluation) != 0:
			if floats.Equal(l.loc.X, l.lastX) {
				l.loc.F = l.lastF
				copy(l.loc.Gradient, l.lastG)
				op, err = l.ls.Iterate(l.loc)
				continue
			}
			return l.evals >= l.max, nil
		default:
			return true, errors.New("estimator: unexpected line search operation")
		}
	}
}

// accept records l.loc as an accepted iterate and reports whether the run
// has converged.
func (l *lbfgs) accept() bool {
	var it Iterate
	if len(l.hist) == l.store+1 {
		it = l.hist[0]
		copy(l.hist, l.hist[1:])
		l.hist = l.hist[:l.store]
	} else {
		it = Iterate{X: make([]float64, len(l.loc.X)), Gradient: make([]float64, len(l.loc.X))}
	}
	copy(it.X, l.loc.X)
	copy(it.Gradient, l.loc.Gradient)
	it.F = l.loc.F
	it.Round = l.evals
	l.hist = append(l.hist, it)
	if k := len(l.hist); k > 1 {
		prev, cur := l.hist[k-2].F, it.F
		if prev-cur < l.tol*math.Max(1, math.Abs(cur)) {
			l.stall++
		} else {
			l.stall = 0
		}
	}
	return l.stall >= stallIterations || allZero(it.Gradient)
}

// allZero reports whether every element of v is zero: ‖v‖∞ = 0, without a
// pass over all of v unless it is zero (a NaN is not zero).
func allZero(v []float64) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

// result returns the last accepted iterate, whose objective is known.
func (l *lbfgs) result() ([]float64, float64) {
	last := l.hist[len(l.hist)-1]
	return last.X, last.F
}

func (l *lbfgs) save(cp *Checkpoint) {
	cp.History = make([]Iterate, len(l.hist))
	for i, it := range l.hist {
		cp.History[i] = Iterate{X: append([]float64(nil), it.X...), Gradient: append([]float64(nil), it.Gradient...), F: it.F, Round: it.Round}
	}
	cp.Stall = l.stall
	if len(l.hist) > 0 {
		last := l.hist[len(l.hist)-1]
		cp.X = append([]float64(nil), last.X...)
		cp.Round = last.Round
	}
}

// restore rebuilds the run from a checkpoint taken at an accepted iterate.
// Replaying the stored iterates through a fresh LBFGS rebuilds its memory
// exactly (the same pairs, used in the same order), so the continued run is
// bit-identical to one that never stopped.
//
// It reports done when the checkpoint's last iterate had already converged
// (the stall count reached, or a zero gradient), from which no line search
// can start; any other failure to restart the line search is an error.
func (l *lbfgs) restore(cp *Checkpoint) (done bool, err error) {
	h := cp.History
	if len(h) == 0 {
		return false, nil
	}
	n := len(l.loc.X)
	dir := make([]float64, n)
	for i, it := range h[:len(h)-1] {
		loc := &optimize.Location{X: it.X, F: it.F, Gradient: it.Gradient}
		if i == 0 {
			l.dir.LBFGS.InitDirection(loc, dir)
		} else {
			l.dir.LBFGS.NextDirection(loc, dir)
		}
	}
	l.dir.resumed = len(h) > 1
	last := h[len(h)-1]
	copy(l.loc.X, last.X)
	copy(l.loc.Gradient, last.Gradient)
	l.loc.F = last.F
	copy(l.lastX, last.X)
	copy(l.lastG, last.Gradient)
	l.lastF = last.F
	l.hist = nil
	for _, it := range h {
		l.hist = append(l.hist, Iterate{X: append([]float64(nil), it.X...), Gradient: append([]float64(nil), it.Gradient...), F: it.F, Round: it.Round})
	}
	l.stall = cp.Stall
	l.evals = last.Round
	l.started = true
	if l.stall >= stallIterations || allZero(last.Gradient) {
		return true, nil
	}
	op, err := l.ls.Init(l.loc)
	if err != nil {
		if stationary(last) {
			return true, nil // as in tell
		}
		return false, fmt.Errorf("%w: restart from the checkpoint of round %d: %w", ErrLineSearch, last.Round, err)
	}
	if op&(optimize.FuncEvaluation|optimize.GradEvaluation) == 0 {
		return false, fmt.Errorf("%w: restart from the checkpoint of round %d: unexpected line search operation %v", ErrLineSearch, last.Round, op)
	}
	return false, nil
}
