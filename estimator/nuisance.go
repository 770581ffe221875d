package estimator

import (
	"context"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/internal/mapped"
	"github.com/crffd/crffd/internal/parallel"
)

// streamFolds keys the cross-fitting folds of a site.
const streamFolds uint64 = 0x666f6c6473 // "folds"

// Nuisance returns the nuisance predictions of data's rows (only data.X is
// read) from site's propensity and outcome models: ê(x) = p(w = 1 | x) and
// the outcome model's means μ̂0(x), μ̂1(x) in the outcome's own units
// (probabilities for a binary outcome). For an outcome modelled as log y
// the mean of y is exp(m + s²/2), with m the log-scale mean and s the
// outcome model's learned noise scale, not the median exp(m).
func (m *Model) Nuisance(site int, data *Data) (inference.Nuisance, error) {
	if m == nil || m.Setup == nil || m.Propensity == nil || m.Outcome == nil {
		return inference.Nuisance{}, errors.New("estimator: propensity and outcome models are not fitted")
	}
	if site < 0 || site >= len(m.Propensity.Weights) || site >= len(m.Outcome.Weights) ||
		m.Propensity.Weights[site] == nil || m.Outcome.Weights[site] == nil {
		return inference.Nuisance{}, fmt.Errorf("estimator: no site %d", site)
	}
	if data == nil || data.X == nil {
		return inference.Nuisance{}, errors.New("estimator: nil data")
	}
	if data.X.IsEmpty() {
		return inference.Nuisance{Propensity: []float64{}, Mu0: []float64{}, Mu1: []float64{}}, nil
	}
	if _, dx := data.X.Dims(); dx != len(m.Setup.Schema.Binary) {
		return inference.Nuisance{}, fmt.Errorf("estimator: %d covariates, want %d", dx, len(m.Setup.Schema.Binary))
	}
	prop, mu0, mu1 := m.nuisanceModelUnits(site, data.X)
	nu := inference.Nuisance{Propensity: prop, Mu0: mu0, Mu1: mu1}
	sd := m.outcomeSD()
	for i := range mu0 {
		nu.Mu0[i] = m.Setup.yMean(mu0[i], sd)
		nu.Mu1[i] = m.Setup.yMean(mu1[i], sd)
	}
	return nu, nil
}

// nuisanceModelUnits returns the propensity and the outcome model's means,
// in model units (logits for a binary outcome), of the rows raw (not yet
// standardised). It standardises and maps FeatureChunk rows at a time, so
// that its memory does not grow with the rows beyond the three results.
func (m *Model) nuisanceModelUnits(site int, raw *mat.Dense) (prop, mu0, mu1 []float64) {
	n, dx := raw.Dims()
	if n == 0 {
		return []float64{}, []float64{}, []float64{}
	}
	setup := m.Setup
	buf := mat.NewDense(min(n, FeatureChunk), dx, nil)
	prop, mu0, mu1 = mapped.Large(n), mapped.Large(n), mapped.Large(n)
	pw, ow := m.Propensity.Weights[site]["psi"], m.Outcome.Weights[site]
	fp, fo := setup.Maps[mapPropensity], setup.Maps[mapOutcome]
	ap, ao := m.Propensity.Shared["a"][0], m.Outcome.Shared["a"][0]
	var col mat.Dense
	var a, b mat.VecDense
	for i0 := 0; i0 < n; i0 += FeatureChunk {
		i1 := min(n, i0+FeatureChunk)
		xs := buf.Slice(0, i1-i0, 0, dx).(*mat.Dense)
		for i := i0; i < i1; i++ {
			setup.Scaler.standardizeRow(xs.RawRowView(i-i0), raw.RawRowView(i))
		}
		col.Reset()
		col.Mul(fp.Map(nil, xs, ap), pw)
		for i := i0; i < i1; i++ {
			prop[i] = sigmoid(col.At(i-i0, 0))
		}
		phi := fo.Map(nil, xs, ao)
		a.Reset()
		b.Reset()
		a.MulVec(phi, ow["beta0"].ColView(0))
		b.MulVec(phi, ow["beta1"].ColView(0))
		copy(mu0[i0:i1], a.RawVector().Data)
		copy(mu1[i0:i1], b.RawVector().Data)
	}
	return prop, mu0, mu1
}

// outcomeSD is the outcome model's noise scale in model units, e^t, or 0
// for a binary outcome.
func (m *Model) outcomeSD() float64 {
	if t, ok := m.Outcome.Shared["t"]; ok {
		return math.Exp(t[0])
	}
	return 0
}

// standardizeX returns the covariates standardised with the pooled scaler.
func (s *Setup) standardizeX(src *mat.Dense) *mat.Dense { return s.Scaler.standardizeX(src) }

// standardizeX returns the covariates standardised: (x − Mean)/Scale.
func (s Scaler) standardizeX(src *mat.Dense) *mat.Dense {
	n, dx := src.Dims()
	x := mat.NewDense(n, dx, nil)
	for i := range n {
		s.standardizeRow(x.RawRowView(i), src.RawRowView(i))
	}
	return x
}

// standardizeRow sets dst to the row src standardised: (x − Mean)/Scale.
func (s Scaler) standardizeRow(dst, src []float64) {
	for j, v := range src {
		dst[j] = (v - s.Mean[j]) / s.Scale[j]
	}
}

// CrossFit returns nuisance predictions for every row of data, the rows
// of federation site site, from models that did not see the row, combined
// by a super learner. The rows are split into folds (inference.Folds,
// stratified by arm and keyed by Config.Seed and site; Config.Folds of
// them), and for each fold two learners are trained on the site's other
// folds alone and predict the fold: the random-feature propensity and
// outcome models (LearnerRFF) and the textbook GLMs on the covariates
// (LearnerGLM). The propensity and each arm's outcome mean are then each
// the convex combination of the two learners whose out-of-fold loss is
// least (a weight on a grid of 21; the outcome's over its arm's rows), as
// van der Laan, Polley and Hubbard's super learner stacks its candidates;
// Nuisance.Stack records the weights and losses. A row's own values enter
// its predictions only through those three weights, never through a
// fitted model.
//
// The models see only the site's own rows, so cross-fitting costs no
// federated rounds and sends nothing; it uses setup's standardisation and
// base frequencies, which a federation agrees on before training, so a
// site daemon and the simulated federation get the same predictions.
func CrossFit(ctx context.Context, setup *Setup, site int, data *Data) (inference.Nuisance, error) {
	return CrossFitExcept(ctx, setup, site, data, nil)
}

// CrossFitExcept is CrossFit with the rows at positions held (ascending)
// never trained on: each fold's models learn from the other folds' rows
// that are not held, and the stack's weights are chosen on the rows that
// are not held, while every row, held or not, is predicted by the models
// of its own fold. Model selection holds its validation rows so: one
// cross-fit gives the training rows' nuisances, whose pseudo-outcomes
// train the DR-learner without a validation row's outcome reaching it,
// the validation rows' nuisances, from models that never saw them, and
// so every row's, as the AIPW needs. With held empty it is CrossFit.
func CrossFitExcept(ctx context.Context, setup *Setup, site int, data *Data, held []int) (inference.Nuisance, error) {
	cands, err := crossFitLearners(ctx, setup, site, data, held)
	if err != nil {
		return inference.Nuisance{}, err
	}
	out, err := stack(data, setup.Schema.BinaryOutcome, []string{LearnerGLM, LearnerRFF}, cands[:], held)
	if err != nil {
		return inference.Nuisance{}, fmt.Errorf("estimator: site %d: %w", site, err)
	}
	return out, nil
}

// heldMask returns, for n rows, which are at the positions held; nil
// when none is.
func heldMask(n int, held []int) ([]bool, error) {
	if len(held) == 0 {
		return nil, nil
	}
	mask := make([]bool, n)
	for k, i := range held {
		if i < 0 || i >= n || (k > 0 && i <= held[k-1]) {
			return nil, fmt.Errorf("estimator: held rows must be ascending positions below %d", n)
		}
		mask[i] = true
	}
	return mask, nil
}

// crossFitLearners returns the out-of-fold predictions of every row of
// data by each learner, LearnerGLM's then LearnerRFF's, no model trained
// on a row at the positions held (CrossFitExcept).
func crossFitLearners(ctx context.Context, setup *Setup, site int, data *Data, held []int) ([2]inference.Nuisance, error) {
	var cands [2]inference.Nuisance
	if setup == nil {
		return cands, errors.New("estimator: nil setup")
	}
	folds := setup.Config.folds()
	if err := validateData(data, setup.Schema); err != nil {
		return cands, err
	}
	if err := setup.checkOutcomes(data); err != nil {
		return cands, fmt.Errorf("estimator: site %d: %w", site, err)
	}
	assign, err := inference.Folds(data.W, folds, mix(streamFolds, setup.Config.Seed, uint64(site)))
	if err != nil {
		return cands, fmt.Errorf("estimator: site %d: %w", site, err)
	}
	n := data.Rows()
	isHeld, err := heldMask(n, held)
	if err != nil {
		return cands, err
	}
	for c := range cands {
		cands[c] = inference.Nuisance{Propensity: mapped.Large(n), Mu0: mapped.Large(n), Mu1: mapped.Large(n)}
	}
	// The folds are independent and write disjoint rows of cands, so they
	// run on every core without changing the result.
	fit := func(k int) error {
		var train, fold []int
		for i, f := range assign {
			switch {
			case f == k:
				fold = append(fold, i)
			case isHeld == nil || !isHeld[i]:
				train = append(train, i)
			}
		}
		if len(fold) == 0 {
			return nil
		}
		if len(train) == 0 {
			return fmt.Errorf("estimator: site %d: %d rows (%d held) are too few for %d folds", site, n, len(held), folds)
		}
		// The training rows are read in place, and the fold's are
		// predicted a chunk at a time.
		model, err := fitRows(ctx, data, train, setup, Propensity, Outcome)
		if err != nil {
			return fmt.Errorf("estimator: site %d: cross-fitting fold %d of %d: %w", site, k+1, folds, err)
		}
		glms, err := setup.fitGLM(ctx, data, train)
		if err != nil {
			return fmt.Errorf("estimator: site %d: cross-fitting fold %d of %d: %s learner: %w", site, k+1, folds, LearnerGLM, err)
		}
		for lo := 0; lo < len(fold); lo += FeatureChunk {
			rows := fold[lo:min(len(fold), lo+FeatureChunk)]
			hd := data.Subset(rows)
			rff, err := model.Nuisance(0, hd)
			if err != nil {
				return err
			}
			lin, err := glms.predict(hd.X)
			if err != nil {
				return err
			}
			for c, nu := range []inference.Nuisance{lin, rff} {
				for r, i := range rows {
					cands[c].Propensity[i], cands[c].Mu0[i], cands[c].Mu1[i] = nu.Propensity[r], nu.Mu0[r], nu.Mu1[r]
				}
			}
		}
		return nil
	}
	errs := make([]error, folds)
	parallel.ForEach(folds, 0, func(k int) { errs[k] = fit(k) })
	if err := errors.Join(errs...); err != nil {
		return cands, err
	}
	return cands, nil
}

// Analyse cross-fits the nuisances of data, the rows of federation site
// site (CrossFit), and returns the inference.Analysis of those rows and
// their CATEs cate: what crffd fit and a site daemon report.
func Analyse(ctx context.Context, setup *Setup, site int, data *Data, cate []float64) (*inference.Analysis, error) {
	nu, err := CrossFit(ctx, setup, site, data)
	if err != nil {
		return nil, err
	}
	return inference.Analyse(data.W, data.Y, nu, cate, data.X)
}

// OutcomeCATE returns the outcome model's own effect μ̂1(x) − μ̂0(x) of
// data's rows (only data.X is read), in the outcome's units: the
// "outcome" candidate of model selection.
func (m *Model) OutcomeCATE(site int, data *Data) ([]float64, error) {
	nu, err := m.Nuisance(site, data)
	if err != nil {
		return nil, err
	}
	out := mapped.Large(len(nu.Mu0))
	for i := range out {
		out[i] = nu.Mu1[i] - nu.Mu0[i]
	}
	return out, nil
}

// OutcomeFeatures returns the outcome model's random features φ(x) of
// rows [lo, hi) of data at the model's learned scale: the features on which
// the DR-learner and T-learner candidates of model selection regress. They
// are 2D+dx numbers a row, so callers take a site's rows a chunk
// (FeatureChunk) at a time.
func (m *Model) OutcomeFeatures(data *Data, lo, hi int) (*mat.Dense, error) {
	if m == nil || m.Setup == nil || m.Outcome == nil {
		return nil, errors.New("estimator: outcome model is not fitted")
	}
	if data == nil || data.X == nil {
		return nil, errors.New("estimator: nil data")
	}
	if _, dx := data.X.Dims(); dx != len(m.Setup.Schema.Binary) {
		return nil, fmt.Errorf("estimator: %d covariates, want %d", dx, len(m.Setup.Schema.Binary))
	}
	if lo < 0 || hi < lo || hi > data.Rows() {
		return nil, fmt.Errorf("estimator: rows [%d, %d) of %d", lo, hi, data.Rows())
	}
	if lo == hi {
		return &mat.Dense{}, nil
	}
	x := m.Setup.standardizeX(data.X.Slice(lo, hi, 0, len(m.Setup.Schema.Binary)).(*mat.Dense))
	return m.Setup.Maps[mapOutcome].Map(nil, x, m.Outcome.Shared["a"][0]), nil
}

// OutcomeFeatureCount returns the number of the outcome model's features:
// the columns of OutcomeFeatures.
func (m *Model) OutcomeFeatureCount() int { return m.Setup.Maps[mapOutcome].Out() }

// FeatureChunk is the number of rows whose features are held at once when
// a site's rows are scored or summarised chunk by chunk.
const FeatureChunk = 4096
