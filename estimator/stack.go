package estimator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/glm"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/internal/mapped"
)

// Names of the nuisance learners that CrossFit stacks.
const (
	// LearnerRFF is the random-feature propensity and outcome models of
	// CausalRFF, fitted on the site's own rows.
	LearnerRFF = "rff"
	// LearnerGLM is logistic regression for the propensity and per-arm
	// least squares for the outcome (logistic for a binary outcome, least
	// squares of log y for a log-modelled one) on the covariates.
	LearnerGLM = "glm"
)

// glmRidge is the ridge penalty of the GLM learner on the standardised
// coefficients: negligible beside a few hundred rows, and it keeps a
// separating covariate's coefficient finite.
const glmRidge = 1.0

// stackGrid is the number of steps of the grid of convex weights on which
// the stack is chosen: weights 0, 1/stackGrid, …, 1.
const stackGrid = 20

// probClip bounds the probabilities whose log loss is taken.
const probClip = 1e-6

// NuisanceStack is the GLM learner of the super learner fitted on a
// site's rows, with the weights CrossFit chose for it. A run keeps it with
// its model (modelstore.Setup), so that rows scored later get their ψ
// from the same combination as the run's own rows (Model.StackNuisance).
type NuisanceStack struct {
	Propensity *glm.Model    `json:"propensity"`
	Outcome    [2]*glm.Model `json:"outcome"` // per arm, of y, or of log y when LogY
	// LogVar is each arm's residual variance of log y, for the log-normal
	// mean exp(m + LogVar/2); 0 unless the outcome is log-modelled.
	LogVar [2]float64 `json:"log_var"`
	LogY   bool       `json:"log_y,omitempty"`
	// PropensityWeight and MuWeight (per arm) are the GLM learner's
	// weights; the random-feature models have the rest.
	PropensityWeight float64    `json:"propensity_weight"`
	MuWeight         [2]float64 `json:"mu_weight"`
}

// fitGLM fits the GLM learner on the rows of d at positions rows (nil:
// every row), read in place, with no weights yet.
func (s *Setup) fitGLM(ctx context.Context, d *Data, rows []int) (*NuisanceStack, error) {
	x, w, y := pick(d, rows)
	prop, err := glm.FitLogistic(ctx, x, w, glmRidge)
	if err != nil {
		return nil, fmt.Errorf("propensity: %w", err)
	}
	ns := &NuisanceStack{Propensity: prop, LogY: s.LogY()}
	for arm, own := range armRows(w) {
		ax, ay := mat.Matrix(rowView{x, own}), pickValues(y, own)
		if len(own) == 0 {
			// No row of the arm (a fold of a site whose rows are nearly
			// all treated): the mean outcome of every row, intercept
			// alone (zero covariates are constant, which the fit leaves
			// out). The stack weighs it against the random-feature
			// model on the arm's held-out rows.
			n, dx := x.Dims()
			ax, ay = mat.NewDense(n, dx, nil), y
		}
		if ns.Outcome[arm], ns.LogVar[arm], err = s.fitGLMOutcome(ctx, ax, ay); err != nil {
			return nil, fmt.Errorf("outcome of arm %d: %w", arm, err)
		}
	}
	return ns, nil
}

// pick returns the rows of d at positions rows (nil: every row): a view
// of the covariates, and copies of the treatments and outcomes.
func pick(d *Data, rows []int) (x rowMatrix, w, y []float64) {
	if rows == nil {
		return d.X, d.W, d.Y
	}
	return rowView{d.X, rows}, pickValues(d.W, rows), pickValues(d.Y, rows)
}

// pickValues returns v at positions rows.
func pickValues(v []float64, rows []int) []float64 {
	out := mapped.Large(len(rows))
	for k, i := range rows {
		out[k] = v[i]
	}
	return out
}

// rowView is the rows of a matrix at positions rows, read in place: a
// fold's training rows, which the GLMs read a chunk at a time.
type rowView struct {
	m    rowMatrix
	rows []int
}

// rowMatrix is a matrix whose rows can be read in place.
type rowMatrix interface {
	mat.Matrix
	mat.RawRowViewer
}

// RawRowView returns row i of the view, row rows[i] of the matrix, in
// place: the GLMs read their design matrix's rows through it.
func (v rowView) RawRowView(i int) []float64 { return v.m.RawRowView(v.rows[i]) }

// Dims returns the rows picked and the matrix's columns.
func (v rowView) Dims() (r, c int) {
	_, c = v.m.Dims()
	return len(v.rows), c
}

// At returns element (i, j) of the view: (rows[i], j) of the matrix.
func (v rowView) At(i, j int) float64 { return v.m.At(v.rows[i], j) }

// T returns the view's transpose.
func (v rowView) T() mat.Matrix { return mat.Transpose{Matrix: v} }

// fitGLMOutcome fits one arm's outcome model on the rows x, y, and for a
// log-modelled outcome the residual variance of log y.
func (s *Setup) fitGLMOutcome(ctx context.Context, x mat.Matrix, y []float64) (*glm.Model, float64, error) {
	if s.Schema.BinaryOutcome {
		m, err := glm.FitLogistic(ctx, x, y, glmRidge)
		return m, 0, err
	}
	if !s.LogY() {
		m, err := glm.FitLinear(x, y, glmRidge)
		return m, 0, err
	}
	ly := make([]float64, len(y))
	for i, v := range y {
		ly[i] = math.Log(v)
	}
	m, err := glm.FitLinear(x, ly, glmRidge)
	if err != nil {
		return nil, 0, err
	}
	fit, err := m.Predict(nil, x)
	if err != nil {
		return nil, 0, err
	}
	_, k := x.Dims()
	ss := 0.0
	for i, v := range ly {
		ss += (v - fit[i]) * (v - fit[i])
	}
	return m, ss / math.Max(1, float64(len(ly)-k-1)), nil
}

// predict returns the GLM learner's nuisances of the rows x, in the
// outcome's own units.
func (ns *NuisanceStack) predict(x mat.Matrix) (inference.Nuisance, error) {
	var nu inference.Nuisance
	// A stack read back from a site file may be damaged.
	if ns.Propensity == nil || ns.Outcome[0] == nil || ns.Outcome[1] == nil {
		return nu, errors.New("estimator: the nuisance stack lacks a model")
	}
	for _, a := range []float64{ns.PropensityWeight, ns.MuWeight[0], ns.MuWeight[1]} {
		if !(a >= 0 && a <= 1) {
			return nu, fmt.Errorf("estimator: nuisance stack weight %v outside [0, 1]", a)
		}
	}
	var err error
	if nu.Propensity, err = ns.Propensity.Predict(nil, x); err != nil {
		return nu, err
	}
	for arm, dst := range []*[]float64{&nu.Mu0, &nu.Mu1} {
		if *dst, err = ns.Outcome[arm].Predict(nil, x); err != nil {
			return nu, err
		}
		if ns.LogY {
			for i, v := range *dst {
				(*dst)[i] = math.Exp(v + ns.LogVar[arm]/2)
			}
		}
	}
	return nu, nil
}

// FitNuisanceStack fits the GLM learner of the super learner st (the
// Stack of CrossFit's nuisances of the rows d) on those rows, with st's
// weights.
func (s *Setup) FitNuisanceStack(ctx context.Context, d *Data, st *inference.Stack) (*NuisanceStack, error) {
	if st == nil {
		return nil, fmt.Errorf("estimator: no stack")
	}
	k := slices.Index(st.Learners, LearnerGLM)
	var weights [3]float64
	for j, name := range []string{inference.StackPropensity, inference.StackMu0, inference.StackMu1} {
		m := st.Model(name)
		if k < 0 || m == nil || len(m.Weights) != len(st.Learners) {
			return nil, fmt.Errorf("estimator: a stack of learners %v without the %s learner's %s", st.Learners, LearnerGLM, name)
		}
		weights[j] = m.Weights[k]
	}
	ns, err := s.fitGLM(ctx, d, nil)
	if err != nil {
		return nil, fmt.Errorf("estimator: %s learner: %w", LearnerGLM, err)
	}
	ns.PropensityWeight, ns.MuWeight = weights[0], [2]float64{weights[1], weights[2]}
	return ns, nil
}

// StackNuisance returns the nuisances of the rows of d (only d.X is read)
// from site's propensity and outcome models combined with the GLM learner
// of ns, as the run's rows got theirs; with nil ns, site's models' own
// (Model.Nuisance).
func (m *Model) StackNuisance(site int, d *Data, ns *NuisanceStack) (inference.Nuisance, error) {
	rff, err := m.Nuisance(site, d)
	if err != nil || ns == nil {
		return rff, err
	}
	lin, err := ns.predict(d.X)
	if err != nil {
		return inference.Nuisance{}, fmt.Errorf("estimator: %s learner: %w", LearnerGLM, err)
	}
	blend(rff.Propensity, ns.PropensityWeight, lin.Propensity, rff.Propensity)
	blend(rff.Mu0, ns.MuWeight[0], lin.Mu0, rff.Mu0)
	blend(rff.Mu1, ns.MuWeight[1], lin.Mu1, rff.Mu1)
	return rff, nil
}

// stack combines the cross-fitted predictions of the learners cands
// (named by names) of the rows d: for the propensity and for each arm's
// outcome mean apart, the convex weights on a grid (steps of 1/stackGrid)
// that minimise the cross-validated loss, ties going to the first
// learner's larger weight. Each arm's outcome is chosen on that arm's rows
// alone: μ̂0 enters ψ only through the control rows, weighted by
// 1/(1 − ê), so the treated rows must not choose it. With two learners
// the grid is the segment between them.
func stack(d *Data, binaryOutcome bool, names []string, cands []inference.Nuisance, held []int) (inference.Nuisance, error) {
	if len(cands) != 2 || len(names) != 2 {
		return inference.Nuisance{}, fmt.Errorf("estimator: stacking %d learners, want 2", len(cands))
	}
	n := d.Rows()
	out := inference.Nuisance{Propensity: mapped.Large(n), Mu0: mapped.Large(n), Mu1: mapped.Large(n),
		Stack: &inference.Stack{Learners: append([]string(nil), names...)}}
	arm := armRows(d.W)
	var every []int // nil: every row
	if isHeld, err := heldMask(n, held); err != nil {
		return inference.Nuisance{}, err
	} else if isHeld != nil {
		// The weights are chosen on the rows not held alone.
		every = mapped.LargeArray[int](n - len(held))[:0]
		for i, h := range isHeld {
			if !h {
				every = append(every, i)
			}
		}
		for a := range arm {
			arm[a] = slices.DeleteFunc(arm[a], func(i int) bool { return isHeld[i] })
		}
	}
	for _, m := range []struct {
		name   string
		pick   func(inference.Nuisance) []float64
		dst    []float64
		rows   []int // nil: every row
		target []float64
		binary bool
	}{
		{inference.StackPropensity, func(nu inference.Nuisance) []float64 { return nu.Propensity }, out.Propensity, every, d.W, true},
		{inference.StackMu0, func(nu inference.Nuisance) []float64 { return nu.Mu0 }, out.Mu0, arm[0], d.Y, binaryOutcome},
		{inference.StackMu1, func(nu inference.Nuisance) []float64 { return nu.Mu1 }, out.Mu1, arm[1], d.Y, binaryOutcome},
	} {
		x, y := m.pick(cands[0]), m.pick(cands[1])
		a, sm, err := chooseWeight(x, y, m.target, m.rows, m.binary)
		if err != nil {
			return inference.Nuisance{}, fmt.Errorf("estimator: stacking %s: %w", m.name, err)
		}
		blend(m.dst, a, x, y)
		sm.Name = m.name
		out.Stack.Models = append(out.Stack.Models, sm)
	}
	return out, nil
}

// armRows returns the positions of the control rows and of the treated
// rows of the treatments w.
func armRows(w []float64) [2][]int {
	treated := 0
	for _, v := range w {
		treated += int(v)
	}
	// An arm without rows stays nil, which chooseWeight reads as every
	// row.
	var arm [2][]int
	for a, k := range [2]int{len(w) - treated, treated} {
		if k > 0 {
			arm[a] = mapped.LargeArray[int](k)[:0]
		}
	}
	for i, v := range w {
		arm[int(v)] = append(arm[int(v)], i)
	}
	return arm
}

// blend sets dst to a·x + (1 − a)·y, element by element; dst may be y.
func blend(dst []float64, a float64, x, y []float64) {
	for i := range dst {
		dst[i] = a*x[i] + (1-a)*y[i]
	}
}

// chooseWeight returns the weight a of x in a·x + (1 − a)·y, on the grid,
// whose loss against target over rows (nil: every row) is least: the log
// loss when binary, else the squared error; and the StackedModel of the
// choice, without its name.
func chooseWeight(x, y, target []float64, rows []int, binary bool) (float64, inference.StackedModel, error) {
	if rows == nil {
		rows = mapped.LargeArray[int](len(target))
		for i := range rows {
			rows[i] = i
		}
	}
	if len(rows) == 0 {
		return 0, inference.StackedModel{}, errors.New("no rows")
	}
	loss := func(a float64) float64 {
		l := 0.0
		for _, i := range rows {
			p := a*x[i] + (1-a)*y[i]
			if binary {
				q := math.Min(math.Max(p, probClip), 1-probClip)
				l -= target[i]*math.Log(q) + (1-target[i])*math.Log(1-q)
			} else {
				l += (target[i] - p) * (target[i] - p)
			}
		}
		return l / float64(len(rows))
	}
	best, a := math.Inf(1), 0.0
	for step := stackGrid; step >= 0; step-- {
		if l := loss(float64(step) / stackGrid); l < best {
			best, a = l, float64(step)/stackGrid
		}
	}
	if math.IsInf(best, 0) || math.IsNaN(best) {
		return 0, inference.StackedModel{}, fmt.Errorf("the loss is not finite (%v)", best)
	}
	return a, inference.StackedModel{Weights: []float64{a, 1 - a}, Loss: []float64{loss(1), loss(0), best}, N: len(rows)}, nil
}

// StackedNuisance predicts the rows of d by the super learner of CrossFit
// fitted on train, the training rows of site: the two learners are m's
// own propensity and outcome models (LearnerRFF, trained with whatever
// transfer m learned) and the GLMs fitted on all of train (LearnerGLM),
// combined with the weights that cross-fitting train chooses. It is the
// nuisance of rows m never saw, as the held-out rows of crffd eval are.
func (m *Model) StackedNuisance(ctx context.Context, site int, train, d *Data) (inference.Nuisance, error) {
	if m == nil || m.Setup == nil {
		return inference.Nuisance{}, fmt.Errorf("estimator: model is not fitted")
	}
	cv, err := CrossFit(ctx, m.Setup, site, train)
	if err != nil {
		return inference.Nuisance{}, err
	}
	ns, err := m.Setup.FitNuisanceStack(ctx, train, cv.Stack)
	if err != nil {
		return inference.Nuisance{}, fmt.Errorf("estimator: site %d: %w", site, err)
	}
	nu, err := m.StackNuisance(site, d, ns)
	if err != nil {
		return inference.Nuisance{}, err
	}
	nu.Stack = cv.Stack
	return nu, nil
}
