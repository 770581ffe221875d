package estimator

import (
	"context"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/glm"
	"github.com/crffd/crffd/inference"
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
	// PropensityWeight and OutcomeWeight are the GLM learner's weights;
	// the random-feature models have the rest.
	PropensityWeight float64 `json:"propensity_weight"`
	OutcomeWeight    float64 `json:"outcome_weight"`
}

// fitGLM fits the GLM learner on the rows of d, with no weights yet.
func (s *Setup) fitGLM(ctx context.Context, d *Data) (*NuisanceStack, error) {
	prop, err := glm.FitLogistic(ctx, d.X, d.W, glmRidge)
	if err != nil {
		return nil, fmt.Errorf("propensity: %w", err)
	}
	ns := &NuisanceStack{Propensity: prop, LogY: s.LogY()}
	for arm := range ns.Outcome {
		var rows []int
		for i, w := range d.W {
			if w == float64(arm) {
				rows = append(rows, i)
			}
		}
		if len(rows) == 0 {
			return nil, fmt.Errorf("outcome: no rows in arm %d", arm)
		}
		if ns.Outcome[arm], ns.LogVar[arm], err = s.fitGLMOutcome(ctx, d.Subset(rows)); err != nil {
			return nil, fmt.Errorf("outcome of arm %d: %w", arm, err)
		}
	}
	return ns, nil
}

// fitGLMOutcome fits one arm's outcome model on d, and for a log-modelled
// outcome the residual variance of log y.
func (s *Setup) fitGLMOutcome(ctx context.Context, d *Data) (*glm.Model, float64, error) {
	if s.Schema.BinaryOutcome {
		m, err := glm.FitLogistic(ctx, d.X, d.Y, glmRidge)
		return m, 0, err
	}
	if !s.LogY() {
		m, err := glm.FitLinear(d.X, d.Y, glmRidge)
		return m, 0, err
	}
	y := make([]float64, len(d.Y))
	for i, v := range d.Y {
		y[i] = math.Log(v)
	}
	m, err := glm.FitLinear(d.X, y, glmRidge)
	if err != nil {
		return nil, 0, err
	}
	fit, err := m.Predict(nil, d.X)
	if err != nil {
		return nil, 0, err
	}
	_, k := d.X.Dims()
	ss := 0.0
	for i, v := range y {
		ss += (v - fit[i]) * (v - fit[i])
	}
	return m, ss / math.Max(1, float64(len(y)-k-1)), nil
}

// predict returns the GLM learner's nuisances of the rows x, in the
// outcome's own units.
func (ns *NuisanceStack) predict(x mat.Matrix) (inference.Nuisance, error) {
	var nu inference.Nuisance
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

// glmNuisance fits the GLM learner on train and predicts the rows of held.
func (s *Setup) glmNuisance(ctx context.Context, train, held *Data) (inference.Nuisance, error) {
	ns, err := s.fitGLM(ctx, train)
	if err != nil {
		return inference.Nuisance{}, err
	}
	return ns.predict(held.X)
}

// FitNuisanceStack fits the GLM learner of the super learner st (the
// Stack of CrossFit's nuisances of the rows d) on those rows, with st's
// weights.
func (s *Setup) FitNuisanceStack(ctx context.Context, d *Data, st *inference.Stack) (*NuisanceStack, error) {
	if st == nil {
		return nil, fmt.Errorf("estimator: no stack")
	}
	k := slices.Index(st.Learners, LearnerGLM)
	if k < 0 || len(st.PropensityWeights) != len(st.Learners) || len(st.OutcomeWeights) != len(st.Learners) {
		return nil, fmt.Errorf("estimator: a stack of learners %v", st.Learners)
	}
	ns, err := s.fitGLM(ctx, d)
	if err != nil {
		return nil, fmt.Errorf("estimator: %s learner: %w", LearnerGLM, err)
	}
	ns.PropensityWeight, ns.OutcomeWeight = st.PropensityWeights[k], st.OutcomeWeights[k]
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
	aP, aO := ns.PropensityWeight, ns.OutcomeWeight
	for i := range rff.Propensity {
		rff.Propensity[i] = aP*lin.Propensity[i] + (1-aP)*rff.Propensity[i]
		rff.Mu0[i] = aO*lin.Mu0[i] + (1-aO)*rff.Mu0[i]
		rff.Mu1[i] = aO*lin.Mu1[i] + (1-aO)*rff.Mu1[i]
	}
	return rff, nil
}

// stack combines the cross-fitted predictions of the learners cands
// (named by names) of the rows d: for the propensity and for the outcome
// apart, the convex weights on a grid (steps of 1/stackGrid) that
// minimise the cross-validated loss, ties going to the earlier learner's
// larger weight. With two learners the grid is the segment between them.
func stack(d *Data, binaryOutcome bool, names []string, cands []inference.Nuisance) (inference.Nuisance, error) {
	if len(cands) != 2 || len(names) != 2 {
		return inference.Nuisance{}, fmt.Errorf("estimator: stacking %d learners, want 2", len(cands))
	}
	n := d.Rows()
	mix := func(a float64, x, y []float64, dst []float64) []float64 {
		for i := range dst {
			dst[i] = a*x[i] + (1-a)*y[i]
		}
		return dst
	}
	propLoss := func(e []float64) float64 { return logLoss(d.W, e) }
	obs := make([]float64, n)
	outLoss := func(mu0, mu1 []float64) float64 {
		for i, w := range d.W {
			obs[i] = mu0[i]
			if w == 1 {
				obs[i] = mu1[i]
			}
		}
		if binaryOutcome {
			return logLoss(d.Y, obs)
		}
		return squaredError(d.Y, obs)
	}
	st := &inference.Stack{Learners: append([]string(nil), names...)}
	for _, c := range cands {
		st.PropensityLoss = append(st.PropensityLoss, propLoss(c.Propensity))
		st.OutcomeLoss = append(st.OutcomeLoss, outLoss(c.Mu0, c.Mu1))
	}
	out := inference.Nuisance{Propensity: make([]float64, n), Mu0: make([]float64, n), Mu1: make([]float64, n), Stack: st}
	e, m0, m1 := make([]float64, n), make([]float64, n), make([]float64, n)
	bestP, bestO := math.Inf(1), math.Inf(1)
	var aP, aO float64
	for step := stackGrid; step >= 0; step-- {
		a := float64(step) / stackGrid
		if l := propLoss(mix(a, cands[0].Propensity, cands[1].Propensity, e)); l < bestP {
			bestP, aP = l, a
		}
		if l := outLoss(mix(a, cands[0].Mu0, cands[1].Mu0, m0), mix(a, cands[0].Mu1, cands[1].Mu1, m1)); l < bestO {
			bestO, aO = l, a
		}
	}
	mix(aP, cands[0].Propensity, cands[1].Propensity, out.Propensity)
	mix(aO, cands[0].Mu0, cands[1].Mu0, out.Mu0)
	mix(aO, cands[0].Mu1, cands[1].Mu1, out.Mu1)
	st.PropensityWeights, st.OutcomeWeights = []float64{aP, 1 - aP}, []float64{aO, 1 - aO}
	st.PropensityLoss, st.OutcomeLoss = append(st.PropensityLoss, bestP), append(st.OutcomeLoss, bestO)
	if math.IsInf(bestP, 0) || math.IsInf(bestO, 0) || math.IsNaN(bestP) || math.IsNaN(bestO) {
		return inference.Nuisance{}, fmt.Errorf("estimator: nuisance losses are not finite (propensity %v, outcome %v)", bestP, bestO)
	}
	return out, nil
}

// logLoss is the mean negative log-likelihood of the 0/1 values v under
// the probabilities p, each clipped to [probClip, 1 − probClip].
func logLoss(v, p []float64) float64 {
	l := 0.0
	for i, x := range v {
		q := math.Min(math.Max(p[i], probClip), 1-probClip)
		l -= x*math.Log(q) + (1-x)*math.Log(1-q)
	}
	return l / float64(len(v))
}

// squaredError is the mean squared difference of v and p.
func squaredError(v, p []float64) float64 {
	l := 0.0
	for i, x := range v {
		l += (x - p[i]) * (x - p[i])
	}
	return l / float64(len(v))
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
