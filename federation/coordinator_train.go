package federation

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
)

// train trains the models not yet finished, kernel by kernel.
func (c *coordinator) train(ctx context.Context) error {
	m := len(c.cfg.Sites)
	for c.st.Kind < c.st.models() {
		kind, k := estimator.Kinds[c.st.Kind%len(estimator.Kinds)], c.st.Kind/len(estimator.Kinds)
		setup, model := c.setups[k], modelName(kind, k)
		var co *estimator.Coordinator
		var err error
		if c.st.Checkpoint != nil {
			co, err = estimator.ResumeCoordinator(setup, c.st.Checkpoint)
		} else {
			co, err = estimator.NewCoordinator(kind, m, setup)
		}
		if err != nil {
			return err
		}
		outs := make([]*estimator.SiteOutput, m)
		saved := time.Now()
		began, first := saved, co.Round()
		for !co.Done() {
			start := time.Now()
			ins := co.Inputs()
			c.step++
			env := make([]*wire.Envelope, m)
			for s, in := range ins {
				if env[s], err = c.weightsFor(s, model, in); err != nil {
					return err
				}
			}
			got, err := c.exchange(ctx, env, wire.KindGradient)
			if err != nil {
				return err
			}
			for s := range outs {
				if outs[s], err = decodeGradient(setup, kind, s, got[s][wire.KindGradient], ins[s].Round, c.siteRows(s)); err != nil {
					return &SitesError{Sites: []string{c.cfg.Sites[s]}, Err: fmt.Errorf("site %s: %w", c.cfg.Sites[s], err)}
				}
			}
			if _, err := co.Update(outs); err != nil {
				return err
			}
			c.cfg.Metrics.round(time.Since(start))
			c.log.Debug("round", slog.String(wire.LogKeyModel, model), slog.Int(wire.LogKeyRound, co.Round()), slog.Float64("loss", co.Loss()))
			every, interval := c.cfg.CheckpointEvery, c.cfg.CheckpointInterval
			due := (every > 0 && co.Round()%every == 0) || (interval > 0 && time.Since(saved) >= interval)
			if due && !co.Done() {
				c.st.Step, c.st.Checkpoint = c.step, co.Checkpoint()
				if err := c.save(ctx); err != nil {
					return err
				}
				saved = time.Now()
			}
		}
		// The model and the move to the next one are saved together, so a
		// coordinator resumed from here neither repeats nor skips a model.
		c.st.Trained = append(c.st.Trained, co.Result())
		c.st.Kind++
		c.st.Step, c.st.Checkpoint = c.step, nil
		if err := c.save(ctx); err != nil {
			return err
		}
		took := time.Since(began)
		perRound := time.Duration(0)
		if n := co.Round() - first; n > 0 {
			perRound = took / time.Duration(n)
		}
		c.log.Info("model trained", slog.String(wire.LogKeyModel, model), slog.Int("rounds", co.Round()), slog.Float64("loss", co.Loss()),
			slog.Duration("took", took.Round(time.Millisecond)), slog.Duration("per_round", perRound.Round(10*time.Microsecond)))
	}
	return nil
}

// weightsFor is the weights envelope of a training round of model (its
// envelope name, modelName) to site s at the current step.
func (c *coordinator) weightsFor(s int, model string, in *estimator.SiteInput) (*wire.Envelope, error) {
	ts := append(wire.Matrices(pWeights, in.Weights), wire.Vectors(pShared, in.Shared)...)
	ts = append(ts, wire.Scalar(tRound, float64(in.Round)), wire.Scalar(tNoise, float64(in.Noise)))
	return c.envelope(c.cfg.Sites[s], model, wire.KindWeights, ts)
}

func (c *coordinator) save(ctx context.Context) error {
	if c.cfg.Checkpoints == nil {
		return nil
	}
	if err := c.cfg.Checkpoints.Save(ctx, c.st); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// siteRows returns the rows site s kept after de-duplication (its hello's
// count, less the rows the verdict left out): the most any of its answers
// may sum over.
func (c *coordinator) siteRows(s int) int {
	if s < len(c.st.Rows) {
		return c.st.Rows[s]
	}
	return 1 << 52 // a state saved before the count was kept: what integer allows
}

// decodeGradient reads a site's gradient envelope, computed over at most
// most rows (coordinator.siteRows).
func decodeGradient(setup *estimator.Setup, kind estimator.Kind, site int, e *wire.Envelope, round, most int) (*estimator.SiteOutput, error) {
	g, err := matrices(e, pGrads)
	if err != nil {
		return nil, err
	}
	sh := vectors(e, pShared)
	if err := checkBlocks(setup, kind, g, sh); err != nil {
		return nil, err
	}
	loss, err := scalar(e, tLoss)
	if err != nil {
		return nil, err
	}
	rows, err := integer(e, tRows)
	if err != nil {
		return nil, err
	}
	// The rows set how many rounds the model trains for with
	// mini-batches (estimator.Config.RoundsFor).
	if rows > most {
		return nil, fmt.Errorf("%w: %s gradient over %d rows, more than the site's %d", ErrProtocol, kind, rows, most)
	}
	return &estimator.SiteOutput{Model: kind, Round: round, Site: site, Rows: rows, Loss: loss, Grads: g, Shared: sh}, nil
}
