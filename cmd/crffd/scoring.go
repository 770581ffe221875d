package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/progress"
	"github.com/crffd/crffd/store"
)

// newRunID returns a fresh run id: the UTC time and 32 random bits, so that
// ids sort by time and never repeat.
func newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// cateRows pairs the rows of recs with their estimated effects: the chosen
// estimator's CATE (cate; e.CATE, the CausalRFF CATE, unless model
// selection chose another) corrected by cal, with its interval; with a nil
// cal that CATE without an interval. The latent_* columns are e's, and each
// CATE keeps its row's covariate digest, so that an edited row is scored
// again (store.Site.ForgetEdited), its uncalibrated CATE and its AIPW
// score (sc, NaN for none; a nil sc gives none), so that the local ATEs
// can be recomputed as rows come and go (store.Site.UpdateLocalATE).
func cateRows(recs *store.Records, e *estimator.Effects, cate []float64, sc rowScores, cal *inference.Calibration) ([]store.CATE, error) {
	out := make([]store.CATE, len(recs.IDs))
	nan := math.NaN()
	for i, id := range recs.IDs {
		out[i] = store.CATE{RowID: id, CATE: cate[i], SE: nan, Lower: nan, Upper: nan,
			Latent: e.CATE[i], LatentSD: e.SD[i], LatentQ025: e.Lower[i], LatentQ975: e.Upper[i],
			Y0: e.Y0[i], Y1: e.Y1[i], Propensity: e.Propensity[i], XDigest: &recs.XDigests[i],
			Raw: cate[i], PSI: nan}
		if sc.psi != nil {
			out[i].PSI, out[i].PSIClipped = sc.psi[i], sc.clipped[i]
		}
	}
	if cal == nil || len(out) == 0 {
		return out, nil
	}
	tau, se, lo, hi, err := cal.Interval(cate, recs.Data.X)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].CATE, out[i].SE, out[i].Lower, out[i].Upper = tau[i], se[i], lo[i], hi[i]
	}
	return out, nil
}

// rowScores are rows' AIPW scores ψ (NaN for a row without one) and
// whether each row's propensity was clipped in it, in the rows' order; the
// zero value holds none.
type rowScores struct {
	psi     []float64
	clipped []bool
}

// newScores returns the AIPW scores of the rows of d with a valid
// treatment and outcome (crffd site reads the others as NaN), from the
// nuisance predictions nu of d's rows.
func newScores(d *estimator.Data, nu inference.Nuisance) (rowScores, error) {
	n := d.Rows()
	sc := rowScores{psi: make([]float64, n), clipped: make([]bool, n)}
	var keep []int
	for i := range n {
		sc.psi[i] = math.NaN()
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
		return rowScores{}, err
	}
	for j, i := range keep {
		sc.psi[i], sc.clipped[i] = psi[j], inference.IsClipped(sub.Propensity[j], inference.DefaultClip)
	}
	return sc, nil
}

// storeATEs returns the ATEs of scope as crff_ate rows: the AIPW estimate,
// then the plug-in one.
func storeATEs(scope store.Scope, a inference.ATEs) []store.ATE {
	row := func(estimator string, e inference.Estimate, clipped int) store.ATE {
		return store.ATE{Scope: scope, Estimator: estimator, ATE: e.Estimate, SE: e.SE, Lower: e.Lower, Upper: e.Upper, N: e.N, Clipped: clipped,
			NoiseSE: e.NoiseSE}
	}
	return []store.ATE{row(store.EstimatorAIPW, a.AIPW, a.Clipped), row(store.EstimatorPlugIn, a.PlugIn, -1)}
}

// warnUncalibrated logs, at WARN, that a site had too few rows to calibrate
// its CATEs (cal is nil), which crff_cate then holds without intervals.
func warnUncalibrated(a *app, src store.Source, rows int, cal *inference.Calibration) {
	if cal == nil {
		a.log.Warn("too few rows to calibrate the CATEs; crff_cate holds the CausalRFF CATEs without intervals",
			slog.String(logKeyDB, src.DB), slog.Int(logKeyRows, rows))
	}
}

// printATEs prints the AIPW ATE of scope with its interval, the headline,
// then the plug-in ATE.
func printATEs(w io.Writer, scope store.Scope, a inference.ATEs) error {
	_, err := fmt.Fprintf(w, "%s ATE %.4f, 95%% interval [%.4f, %.4f] (AIPW, se %.4f, %d rows, %d propensities clipped to [%g, %g])\n"+
		"%s ATE %.4f (plug-in: mean of the CATEs before calibration; no standard error)\n",
		scope, a.AIPW.Estimate, a.AIPW.Lower, a.AIPW.Upper, a.AIPW.SE, a.AIPW.N, a.Clipped, inference.DefaultClip, 1-inference.DefaultClip,
		scope, a.PlugIn.Estimate)
	return err
}

// trainingProgress shows each training round on bar: the model, its round
// and the most it may take, and the loss; and collects the loss history
// in *losses, for crff_loss.
func trainingProgress(ctx context.Context, bar *progress.Line, losses *[]store.Loss) context.Context {
	return estimator.WithProgress(ctx, func(p estimator.Progress) {
		bar.Update("training "+p.Model.String(), p.Round, p.MaxRounds, fmt.Sprintf("loss %.4g", p.Loss))
		*losses = append(*losses, store.Loss{Model: p.Model.String(), Round: p.Round, Loss: p.Loss})
	})
}

// scoringProgress shows the rows scored so far on bar.
func scoringProgress(ctx context.Context, bar *progress.Line) context.Context {
	return estimator.WithScoringProgress(ctx, func(done, total int) {
		bar.Update("scoring", done, total, "rows")
	})
}

// calibrationParams returns cal's parameters for the model store, or nil.
func calibrationParams(cal *inference.Calibration) *inference.CalibrationParams {
	if cal == nil {
		return nil
	}
	p := cal.Params()
	return &p
}
