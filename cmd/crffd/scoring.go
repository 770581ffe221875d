package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

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
