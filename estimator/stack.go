package estimator

import (
	"context"
	"fmt"
	"math"

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

// glmNuisance fits the GLM learner on train and predicts the rows of held,
// in the outcome's own units as Model.Nuisance does.
func (s *Setup) glmNuisance(ctx context.Context, train, held *Data) (inference.Nuisance, error) {
	prop, err := glm.FitLogistic(ctx, train.X, train.W, glmRidge)
	if err != nil {
		return inference.Nuisance{}, fmt.Errorf("propensity: %w", err)
	}
	nu := inference.Nuisance{}
	if nu.Propensity, err = prop.Predict(nil, held.X); err != nil {
		return inference.Nuisance{}, err
	}
	for arm, dst := range []*[]float64{&nu.Mu0, &nu.Mu1} {
		var rows []int
		for i, w := range train.W {
			if w == float64(arm) {
				rows = append(rows, i)
			}
		}
		if len(rows) == 0 {
			return inference.Nuisance{}, fmt.Errorf("outcome: no training rows in arm %d", arm)
		}
		if *dst, err = s.glmOutcome(ctx, train.Subset(rows), held.X); err != nil {
			return inference.Nuisance{}, fmt.Errorf("outcome of arm %d: %w", arm, err)
		}
	}
	return nu, nil
}

// glmOutcome fits one arm's outcome model on d and returns its means at x.
func (s *Setup) glmOutcome(ctx context.Context, d *Data, x mat.Matrix) ([]float64, error) {
	if s.Schema.BinaryOutcome {
		m, err := glm.FitLogistic(ctx, d.X, d.Y, glmRidge)
		if err != nil {
			return nil, err
		}
		return m.Predict(nil, x)
	}
	y, logY := d.Y, s.LogY()
	if logY {
		y = make([]float64, len(d.Y))
		for i, v := range d.Y {
			y[i] = math.Log(v)
		}
	}
	m, err := glm.FitLinear(d.X, y, glmRidge)
	if err != nil {
		return nil, err
	}
	mu, err := m.Predict(nil, x)
	if err != nil || !logY {
		return mu, err
	}
	// The mean of a log-normal y is exp(m + s²/2), with s² the residual
	// variance of log y.
	fit, err := m.Predict(nil, d.X)
	if err != nil {
		return nil, err
	}
	_, k := d.X.Dims()
	ss := 0.0
	for i, v := range y {
		ss += (v - fit[i]) * (v - fit[i])
	}
	v := ss / math.Max(1, float64(len(y)-k-1))
	for i := range mu {
		mu[i] = math.Exp(mu[i] + v/2)
	}
	return mu, nil
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
	rff, err := m.Nuisance(site, d)
	if err != nil {
		return inference.Nuisance{}, err
	}
	lin, err := m.Setup.glmNuisance(ctx, train, d)
	if err != nil {
		return inference.Nuisance{}, fmt.Errorf("estimator: site %d: %s learner: %w", site, LearnerGLM, err)
	}
	aP, aO := cv.Stack.PropensityWeights[0], cv.Stack.OutcomeWeights[0]
	for i := range rff.Propensity {
		rff.Propensity[i] = aP*lin.Propensity[i] + (1-aP)*rff.Propensity[i]
		rff.Mu0[i] = aO*lin.Mu0[i] + (1-aO)*rff.Mu0[i]
		rff.Mu1[i] = aO*lin.Mu1[i] + (1-aO)*rff.Mu1[i]
	}
	rff.Stack = cv.Stack
	return rff, nil
}
