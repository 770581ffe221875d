package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"time"

	"gonum.org/v1/gonum/mat"

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

// cateRows pairs row ids with their estimated effects: the CausalRFF CATE
// corrected by cal, with its interval, for the rows whose covariates are
// x; with a nil cal the CausalRFF CATE without an interval.
func cateRows(ids []store.RowID, e *estimator.Effects, cal *inference.Calibration, x mat.Matrix) ([]store.CATE, error) {
	out := make([]store.CATE, len(ids))
	nan := math.NaN()
	for i, id := range ids {
		out[i] = store.CATE{RowID: id, CATE: e.CATE[i], SE: nan, Lower: nan, Upper: nan,
			Latent: e.CATE[i], LatentSD: e.SD[i], LatentQ025: e.Lower[i], LatentQ975: e.Upper[i],
			Y0: e.Y0[i], Y1: e.Y1[i], Propensity: e.Propensity[i]}
	}
	if cal == nil || len(ids) == 0 {
		return out, nil
	}
	tau, se, lo, hi, err := cal.Interval(e.CATE, x)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].CATE, out[i].SE, out[i].Lower, out[i].Upper = tau[i], se[i], lo[i], hi[i]
	}
	return out, nil
}

// localATEs returns the site's AIPW ATE, from the analysis of its rows,
// and its plug-in ATE, the mean of the CausalRFF CATEs in e, in that order.
func localATEs(an *inference.Analysis, e *estimator.Effects) ([]store.ATE, error) {
	plugin, err := inference.PlugIn(e.CATE)
	if err != nil {
		return nil, err
	}
	return []store.ATE{
		storeATE(store.ScopeLocal, store.EstimatorAIPW, an.AIPW, an.Clipped),
		storeATE(store.ScopeLocal, store.EstimatorPlugIn, plugin, -1),
	}, nil
}

// storeATE is e as a crff_ate row; clipped is −1 for an estimator without
// propensities.
func storeATE(scope store.Scope, estimator string, e inference.Estimate, clipped int) store.ATE {
	return store.ATE{Scope: scope, Estimator: estimator, ATE: e.Estimate, SE: e.SE, Lower: e.Lower, Upper: e.Upper, N: e.N, Clipped: clipped}
}

// printATEs prints the AIPW ATE of scope with its interval, the headline,
// then the plug-in ATE: ates as localATEs or siteATEs return them.
func printATEs(w io.Writer, scope string, ates ...store.ATE) error {
	aipw, plugin := ates[0], ates[1]
	_, err := fmt.Fprintf(w, "%s ATE %.4f, 95%% interval [%.4f, %.4f] (AIPW, se %.4f, %d rows, %d propensities clipped to [%g, %g])\n"+
		"%s ATE %.4f (plug-in: mean CausalRFF CATE; no standard error)\n",
		scope, aipw.ATE, aipw.Lower, aipw.Upper, aipw.SE, aipw.N, aipw.Clipped, inference.DefaultClip, 1-inference.DefaultClip,
		scope, plugin.ATE)
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
