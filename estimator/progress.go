package estimator

import (
	"context"
	"time"
)

// Progress describes the state of training after one round.
type Progress struct {
	Model     Kind
	Round     int     // rounds done for this model
	MaxRounds int     // the most this model may take (Coordinator.MaxRounds)
	Loss      float64 // J at the optimiser's current parameters
}

type progressKey struct{}

// WithProgress returns a context under which Train calls f after every
// round, so that a caller can show progress without the estimator knowing
// about terminals or logs. f runs on the training goroutine: keep it short.
func WithProgress(ctx context.Context, f func(Progress)) context.Context {
	return context.WithValue(ctx, progressKey{}, f)
}

// reportProgress calls the function of WithProgress, if any.
func reportProgress(ctx context.Context, c *Coordinator) {
	if f, ok := ctx.Value(progressKey{}).(func(Progress)); ok && f != nil {
		f(Progress{Model: c.lay.kind, Round: c.Round(), MaxRounds: c.MaxRounds(), Loss: c.Loss()})
	}
}

type scoringKey struct{}

// WithScoringProgress returns a context under which Effects calls f with
// the rows scored so far and the rows to score, after every chunk of rows.
func WithScoringProgress(ctx context.Context, f func(done, total int)) context.Context {
	return context.WithValue(ctx, scoringKey{}, f)
}

func reportScoring(ctx context.Context, done, total int) {
	if f, ok := ctx.Value(scoringKey{}).(func(done, total int)); ok && f != nil {
		f(done, total)
	}
}

// Training describes one model's training, once it has finished.
type Training struct {
	Model   Kind
	Rows    int // the largest site's training rows
	Rounds  int // rounds taken
	Elapsed time.Duration
}

type trainingKey struct{}

// WithTrainings returns a context under which every model trained,
// including those cross-fitted for the nuisances, is reported to f when
// its training ends; f may be called from several goroutines at once.
// A fit's plan counts the rounds of a sample fit so.
func WithTrainings(ctx context.Context, f func(Training)) context.Context {
	return context.WithValue(ctx, trainingKey{}, f)
}

func reportTraining(ctx context.Context, t Training) {
	if f, ok := ctx.Value(trainingKey{}).(func(Training)); ok && f != nil {
		f(t)
	}
}
