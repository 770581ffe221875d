package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/crffd/crffd/estimator"
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

// localATE is the mean CATE over the site's rows, with the standard error
// of that mean over the rows (the spread of the effects across the site's
// population, not the model's own uncertainty, which crff_cate's intervals
// carry per row).
func localATE(e *estimator.Effects) store.ATE {
	n := len(e.CATE)
	se := math.NaN()
	if n > 1 {
		se = stat.StdDev(e.CATE, nil) / math.Sqrt(float64(n))
	}
	return store.ATE{Scope: store.ScopeLocal, ATE: e.ATE, SE: se, N: n}
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
