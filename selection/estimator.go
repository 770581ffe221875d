package selection

import (
	"context"
	"fmt"
	"slices"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/internal/mapped"
)

// Estimator is a chosen candidate in the form a site keeps with its model
// to compute the CATE of rows scored later: the kind, for the ridge kinds
// the fitted regressions on the model's outcome features, and for the
// ensemble its members and shift.
type Estimator struct {
	Kind  string              `json:"kind"`
	Ridge float64             `json:"ridge,omitempty"`
	Arms  *[2]estimator.Ridge `json:"arms,omitempty"` // tlearner: per treatment arm
	DR    *estimator.Ridge    `json:"dr,omitempty"`   // dr
	// Members are the ensemble's candidates, whose CATEs it averages
	// before adding Shift.
	Members []Member `json:"members,omitempty"`
	Shift   float64  `json:"shift,omitempty"`
}

// Member is a member of an ensemble: its estimator and the index of the
// kernel whose model it needs (Result.Models).
type Member struct {
	Estimator
	Kernel int `json:"kernel"`
	// Candidate is the member's candidate index, by which a site's own
	// members (Centring.Members) are picked from the ensemble's.
	Candidate int `json:"candidate"`
}

// Kernels returns the kernels the estimator needs, increasing: those of
// an ensemble's members, and otherwise 0, the model it is kept with.
func (e Estimator) Kernels() []int {
	if e.Kind != KindEnsemble {
		return []int{0}
	}
	var ks []int
	for _, m := range e.Members {
		if !slices.Contains(ks, m.Kernel) {
			ks = append(ks, m.Kernel)
		}
	}
	slices.Sort(ks)
	return ks
}

// Estimator returns candidate c as the Estimator that site keeps (the
// ensemble with that site's shift), and the index of the kernel whose
// model it needs (Result.Models; for the ensemble, whose members name
// theirs, the first member's).
func (r *Result) Estimator(c, site int) (Estimator, int, error) {
	if c < 0 || c >= len(r.Candidates) {
		return Estimator{}, 0, fmt.Errorf("%w: candidate %d of %d", ErrInput, c, len(r.Candidates))
	}
	e := r.estimators[c]
	var err error
	if e.Kind == KindEnsemble {
		if e, err = e.AtSite(r.Ensemble, site); err != nil {
			return Estimator{}, 0, err
		}
	}
	if r.own != nil {
		if site < 0 || site >= len(r.own) {
			return Estimator{}, 0, fmt.Errorf("%w: site %d of %d", ErrInput, site, len(r.own))
		}
		if e, err = e.Localise(r.own[site]); err != nil {
			return Estimator{}, 0, err
		}
	}
	return e, r.Candidates[c].Kernel, nil
}

// AtSite returns the ensemble estimator e with the shift of site in ens,
// and with the site's members alone (Ensemble.SiteMembers): its own choice
// (CombineBySite), or the federation's.
func (e Estimator) AtSite(ens Ensemble, site int) (Estimator, error) {
	if e.Kind != KindEnsemble {
		return Estimator{}, fmt.Errorf("%w: a %s estimator has no shift", ErrInput, e.Kind)
	}
	if site < 0 || site >= len(ens.Sites) {
		return Estimator{}, fmt.Errorf("%w: site %d of the %d the ensemble was centred on", ErrInput, site, len(ens.Sites))
	}
	e.Shift = ens.Sites[site].Shift
	// The estimator holds the members of every site's choice
	// (Ensembled): a site without its own takes the federation's.
	own := ens.SiteMembers(site)
	var members []Member
	for _, m := range e.Members {
		if slices.Contains(own, m.Candidate) {
			members = append(members, m)
		}
	}
	if len(members) != len(own) {
		return Estimator{}, fmt.Errorf("%w: site %d's members %v are not all the ensemble's", ErrInput, site, own)
	}
	e.Members = members
	return e, nil
}

// CATE returns the estimator's CATE of data's rows, which belong to site,
// from model m (the model of the candidate's kernel); latent, when not
// nil, is m's latent CATE of the rows, already computed. An Estimator of
// no kind is the latent CATE, as models kept before selection existed.
func (e Estimator) CATE(ctx context.Context, m *estimator.Model, site int, data *estimator.Data, latent []float64) ([]float64, error) {
	if e.Kind == KindEnsemble {
		if ks := e.Kernels(); len(ks) != 1 || ks[0] != 0 {
			return nil, fmt.Errorf("%w: an ensemble over kernels %v needs their models (CATEModels)", ErrInput, ks)
		}
		return e.CATEModels(ctx, []*estimator.Model{m}, site, data, latent)
	}
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
	case KindTLearner, KindDR, KindSiteTLearner, KindSiteDR:
		if (ridgeKind(e.Kind) == KindTLearner && e.Arms == nil) || (ridgeKind(e.Kind) == KindDR && e.DR == nil) {
			return nil, fmt.Errorf("%w: %s estimator without its regression", ErrInput, e.Kind)
		}
		return e.ridgeCATE(m, data)
	}
	return nil, fmt.Errorf("%w: unknown estimator kind %q", ErrInput, e.Kind)
}

// CATEModels is CATE for an estimator that may need several kernels'
// models: models[k] is the model of kernel k of an ensemble's members, and
// any other estimator's one model is models[0]. latent, when not nil, is
// models[0]'s latent CATE of the rows.
func (e Estimator) CATEModels(ctx context.Context, models []*estimator.Model, site int, data *estimator.Data, latent []float64) ([]float64, error) {
	if e.Kind != KindEnsemble {
		// Only an ensemble's members name their kernels: any other
		// estimator is kept with one model.
		if len(models) != 1 {
			return nil, fmt.Errorf("%w: a %s estimator with %d models, want 1", ErrInput, e.Kind, len(models))
		}
		return e.CATE(ctx, models[0], site, data, latent)
	}
	if len(e.Members) == 0 {
		return nil, fmt.Errorf("%w: an ensemble without members", ErrInput)
	}
	out := make([]float64, data.Rows())
	for _, mb := range e.Members {
		if mb.Kind == KindEnsemble {
			return nil, fmt.Errorf("%w: an ensemble inside an ensemble", ErrInput)
		}
		if mb.Kernel < 0 || mb.Kernel >= len(models) || models[mb.Kernel] == nil {
			return nil, fmt.Errorf("%w: member %s needs the model of kernel %d of %d", ErrInput, mb.Kind, mb.Kernel, len(models))
		}
		var lat []float64
		if mb.Kernel == 0 {
			lat = latent
		}
		tau, err := mb.Estimator.CATE(ctx, models[mb.Kernel], site, data, lat)
		if err != nil {
			return nil, err
		}
		for i, v := range tau {
			out[i] += v
		}
	}
	k := float64(len(e.Members))
	for i := range out {
		out[i] = out[i]/k + e.Shift
	}
	return out, nil
}

// regressions returns the estimator's fitted regressions.
func (e Estimator) regressions() []estimator.Ridge {
	switch {
	case ridgeKind(e.Kind) == KindTLearner && e.Arms != nil:
		return e.Arms[:]
	case ridgeKind(e.Kind) == KindDR && e.DR != nil:
		return []estimator.Ridge{*e.DR}
	}
	return nil
}

// ridgeCATE returns the CATE of data's rows under the ridge kinds, from m's
// outcome features of estimator.FeatureChunk rows at a time.
func (e Estimator) ridgeCATE(m *estimator.Model, data *estimator.Data) ([]float64, error) {
	n := data.Rows()
	cate := mapped.Large(n)[:0] // appended to within its room
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
		if ridgeKind(e.Kind) == KindDR {
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
