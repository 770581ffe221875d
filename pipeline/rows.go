package pipeline

import (
	"context"
	"fmt"
	"math"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/internal/mapped"
	"github.com/crffd/crffd/store"
)

// Scores are rows' AIPW scores ψ (NaN for a row without one) and whether
// each row's propensity was clipped in it, in the rows' order; the zero
// value holds none.
type Scores struct {
	PSI     []float64
	Clipped []bool
}

// NewScores returns the AIPW scores of the rows of d with a valid
// treatment and outcome (the others have none: NaN), from the nuisance
// predictions nu of d's rows.
func NewScores(d *estimator.Data, nu inference.Nuisance) (Scores, error) {
	n := d.Rows()
	sc := Scores{PSI: mapped.Large(n), Clipped: make([]bool, n)}
	var keep []int
	for i := range n {
		sc.PSI[i] = math.NaN()
		if (d.W[i] == 0 || d.W[i] == 1) && !math.IsNaN(d.Y[i]) && !math.IsInf(d.Y[i], 0) {
			keep = append(keep, i)
		}
	}
	w, y := make([]float64, len(keep)), make([]float64, len(keep))
	sub := inference.Nuisance{Propensity: make([]float64, len(keep)), Mu0: make([]float64, len(keep)), Mu1: make([]float64, len(keep))}
	for j, i := range keep {
		w[j], y[j] = d.W[i], d.Y[i]
		sub.Propensity[j], sub.Mu0[j], sub.Mu1[j] = nu.Propensity[i], nu.Mu0[i], nu.Mu1[i]
	}
	psi, _, err := inference.Scores(w, y, sub, inference.DefaultClip)
	if err != nil {
		return Scores{}, err
	}
	for j, i := range keep {
		sc.PSI[i], sc.Clipped[i] = psi[j], inference.IsClipped(sub.Propensity[j], inference.DefaultClip)
	}
	return sc, nil
}

// Rows pairs the rows of recs with their estimated effects: the chosen
// estimator's CATE (cate; e.CATE, the CausalRFF CATE, unless model
// selection chose another) corrected by cal, with its interval; with a nil
// cal that CATE without an interval. The latent_* columns are e's, and each
// CATE keeps its row's covariate digest, so that an edited row is scored
// again (store.Site.ForgetEdited), its uncalibrated CATE and its AIPW
// score (sc; the zero Scores gives none), so that the local ATEs can be
// recomputed as rows come and go (store.Site.UpdateLocalATE).
func Rows(recs *store.Records, e *estimator.Effects, cate []float64, sc Scores, cal *inference.Calibration) ([]store.CATE, error) {
	return RowsRange(recs, e, cate, sc, cal, 0, len(recs.IDs))
}

// RowsRange returns Rows of the rows lo..hi−1 alone, so that a run's rows
// can be written a chunk at a time.
func RowsRange(recs *store.Records, e *estimator.Effects, cate []float64, sc Scores, cal *inference.Calibration, lo, hi int) ([]store.CATE, error) {
	if lo < 0 || hi > len(recs.IDs) || lo > hi {
		return nil, fmt.Errorf("rows %d..%d of %d", lo, hi, len(recs.IDs))
	}
	out := make([]store.CATE, hi-lo)
	nan := math.NaN()
	for j := range out {
		i := lo + j
		out[j] = store.CATE{RowID: recs.IDs[i], CATE: cate[i], SE: nan, Lower: nan, Upper: nan,
			Latent: e.CATE[i], LatentSD: e.SD[i], LatentQ025: e.Lower[i], LatentQ975: e.Upper[i],
			Y0: e.Y0[i], Y1: e.Y1[i], Propensity: e.Propensity[i], XDigest: &recs.XDigests[i],
			Raw: cate[i], PSI: nan}
		if sc.PSI != nil {
			out[j].PSI, out[j].PSIClipped = sc.PSI[i], sc.Clipped[i]
		}
	}
	if cal == nil || len(out) == 0 {
		return out, nil
	}
	x := recs.Data.X.Slice(lo, hi, 0, recs.Data.X.RawMatrix().Cols)
	tau, se, l, u, err := cal.Interval(cate[lo:hi], x)
	if err != nil {
		return nil, err
	}
	for j := range out {
		out[j].CATE, out[j].SE, out[j].Lower, out[j].Upper = tau[j], se[j], l[j], u[j]
	}
	return out, nil
}

// ATERows returns the ATEs of scope as crff_ate rows: the AIPW estimate,
// then the plug-in one.
func ATERows(scope store.Scope, a inference.ATEs) []store.ATE {
	row := func(estimator string, e inference.Estimate, clipped int) store.ATE {
		return store.ATE{Scope: scope, Estimator: estimator, ATE: e.Estimate, SE: e.SE, Lower: e.Lower, Upper: e.Upper, N: e.N, Clipped: clipped,
			NoiseSE: e.NoiseSE}
	}
	return []store.ATE{row(store.EstimatorAIPW, a.AIPW, a.Clipped), row(store.EstimatorPlugIn, a.PlugIn, -1)}
}

// CalibrationParams returns cal's parameters for the model store, or nil.
func CalibrationParams(cal *inference.Calibration) *inference.CalibrationParams {
	if cal == nil {
		return nil
	}
	p := cal.Params()
	return &p
}

// FiniteLosses drops the losses that are not finite numbers, which
// crff_loss does not hold.
func FiniteLosses(ls []store.Loss) []store.Loss {
	out := ls[:0:0]
	for _, l := range ls {
		if !math.IsNaN(l.Loss) && !math.IsInf(l.Loss, 0) && l.Round >= 0 {
			out = append(out, l)
		}
	}
	return out
}

// NuisanceRows are the rows of crff_nuisance that record st, the super
// learner's choice; none when st is nil.
func NuisanceRows(st *inference.Stack) []store.Nuisance {
	if st == nil {
		return nil
	}
	var out []store.Nuisance
	for _, m := range st.Models {
		for k, l := range st.Learners {
			out = append(out, store.Nuisance{Model: m.Name, Learner: l, Weight: m.Weights[k], Loss: m.Loss[k], N: m.N})
		}
		out = append(out, store.Nuisance{Model: m.Name, Learner: store.NuisanceStack, Loss: m.Loss[len(st.Learners)], N: m.N})
	}
	return out
}

// KeptNuisance fits, on the rows d whose scores the super learner st gave,
// the learner a run keeps for rows scored later
// (estimator.Setup.FitNuisanceStack); nil when st is nil.
func KeptNuisance(ctx context.Context, setup *estimator.Setup, d *estimator.Data, st *inference.Stack) (*estimator.NuisanceStack, error) {
	if st == nil {
		return nil, nil
	}
	return setup.FitNuisanceStack(ctx, d, st)
}
