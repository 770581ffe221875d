package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
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

// cateRows pairs row ids with their estimated effects.
func cateRows(ids []store.RowID, e *estimator.Effects) []store.CATE {
	out := make([]store.CATE, len(ids))
	for i, id := range ids {
		out[i] = store.CATE{RowID: id, CATE: e.CATE[i], SD: e.SD[i], Lower: e.Lower[i], Upper: e.Upper[i],
			Y0: e.Y0[i], Y1: e.Y1[i], Propensity: e.Propensity[i]}
	}
	return out
}

// localATEs returns the site's AIPW ATE, from the cross-fitted nuisances
// nu of its rows d, and its plug-in ATE, the mean of the CATEs in e, in
// that order.
func localATEs(d *estimator.Data, nu inference.Nuisance, e *estimator.Effects) ([]store.ATE, error) {
	aipw, _, clipped, err := inference.AIPWEstimate(d.W, d.Y, nu)
	if err != nil {
		return nil, err
	}
	plugin, err := inference.PlugIn(e.CATE)
	if err != nil {
		return nil, err
	}
	return []store.ATE{
		storeATE(store.ScopeLocal, store.EstimatorAIPW, aipw, clipped),
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
