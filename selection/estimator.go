package selection

import (
	"context"
	"fmt"

	"github.com/crffd/crffd/estimator"
)

// Estimator is a chosen candidate in the form a site keeps with its model
// to compute the CATE of rows scored later: the kind, and for the ridge
// kinds the fitted regressions on the model's outcome features.
type Estimator struct {
	Kind  string              `json:"kind"`
	Ridge float64             `json:"ridge,omitempty"`
	Arms  *[2]estimator.Ridge `json:"arms,omitempty"` // tlearner: per treatment arm
	DR    *estimator.Ridge    `json:"dr,omitempty"`   // dr
}

// Estimator returns candidate c as an Estimator, and the index of the
// kernel whose model it needs (Result.Models).
func (r *Result) Estimator(c int) (Estimator, int, error) {
	if c < 0 || c >= len(r.Candidates) {
		return Estimator{}, 0, fmt.Errorf("%w: candidate %d of %d", ErrInput, c, len(r.Candidates))
	}
	return r.estimators[c], r.Candidates[c].Kernel, nil
}

// CATE returns the estimator's CATE of data's rows, which belong to site,
// from model m (the model of the candidate's kernel); latent, when not
// nil, is m's latent CATE of the rows, already computed. An Estimator of
// no kind is the latent CATE, as models kept before selection existed.
func (e Estimator) CATE(ctx context.Context, m *estimator.Model, site int, data *estimator.Data, latent []float64) ([]float64, error) {
	switch e.Kind {
	case "", KindLatent:
		if latent != nil {
			return latent, nil
		}
		eff, err := m.Effects(ctx, site, data)
		if err != nil {
			return nil, err
		}
		return eff.CATE, nil
	case KindOutcome:
		return m.OutcomeCATE(site, data)
	case KindTLearner, KindDR:
		if (e.Kind == KindTLearner && e.Arms == nil) || (e.Kind == KindDR && e.DR == nil) {
			return nil, fmt.Errorf("%w: %s estimator without its regression", ErrInput, e.Kind)
		}
		return e.ridgeCATE(m, data)
	}
	return nil, fmt.Errorf("%w: unknown estimator kind %q", ErrInput, e.Kind)
}

// regressions returns the estimator's fitted regressions.
func (e Estimator) regressions() []estimator.Ridge {
	switch {
	case e.Kind == KindTLearner && e.Arms != nil:
		return e.Arms[:]
	case e.Kind == KindDR && e.DR != nil:
		return []estimator.Ridge{*e.DR}
	}
	return nil
}

// ridgeCATE returns the CATE of data's rows under the ridge kinds, from m's
// outcome features of estimator.FeatureChunk rows at a time.
func (e Estimator) ridgeCATE(m *estimator.Model, data *estimator.Data) ([]float64, error) {
	n := data.Rows()
	cate := make([]float64, 0, n)
	for lo := 0; lo < n; lo += estimator.FeatureChunk {
		phi, err := m.OutcomeFeatures(data, lo, min(n, lo+estimator.FeatureChunk))
		if err != nil {
			return nil, err
		}
		_, p := phi.Dims()
		for _, r := range e.regressions() {
			if len(r.Beta) != p {
				return nil, fmt.Errorf("%w: %s estimator of %d features, the model has %d", ErrInput, e.Kind, len(r.Beta), p)
			}
		}
		if e.Kind == KindDR {
			cate = append(cate, e.DR.Predict(phi)...)
			continue
		}
		y0, y1 := e.Arms[0].Predict(phi), e.Arms[1].Predict(phi)
		for i := range y1 {
			cate = append(cate, y1[i]-y0[i])
		}
	}
	return cate, nil
}
