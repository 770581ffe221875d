package federation

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
)

// finish sends the final weights, gathers the local ATEs, sends the global
// ATE and waits for every site's done. It saves what it learns as it goes
// (State.Finish): the local ATEs once all are in, and each site's done as
// it arrives. A coordinator resumed here therefore asks no site for its ATE
// again, and neither sends to nor waits for the sites that confirmed the
// run, which, started with --once, may have left.
func (c *coordinator) finish(ctx context.Context, setup *estimator.Setup) (*Result, error) {
	m := len(c.cfg.Sites)
	if c.st.Finish == nil {
		f, err := c.gatherATEs(ctx)
		if err != nil {
			return nil, err
		}
		c.st.Finish, c.st.Step = f, c.step
		if err := c.save(ctx); err != nil {
			return nil, err
		}
	} else {
		var done []string
		for s, name := range c.cfg.Sites {
			if c.st.Finish.Done[s] {
				done = append(done, name)
			}
		}
		c.log.Info("resuming the finish phase; not waiting for the sites that confirmed the run",
			slog.String(wire.LogKeyRun, c.st.RunID), slog.Any(LogKeySites, done))
	}
	f := c.st.Finish
	res := &Result{RunID: c.st.RunID, Setup: setup, Models: map[estimator.Kind]*estimator.Trained{},
		LocalATE: slices.Clone(f.LocalATE), LocalSE: slices.Clone(f.LocalSE), Rows: slices.Clone(f.Rows), Dropped: c.st.Dropped}
	for _, t := range c.st.Trained {
		res.Models[t.Model] = t
	}
	var sum2 float64
	total := 0
	for s := range m {
		total += res.Rows[s]
		sum2 += float64(res.Rows[s]*res.Rows[s]) * res.LocalSE[s] * res.LocalSE[s]
	}
	var err error
	if res.GlobalATE, err = estimator.GlobalATE(res.LocalATE, res.Rows); err != nil {
		return nil, err
	}
	res.GlobalSE = math.Sqrt(sum2) / float64(total)
	c.step++
	out := make([]*wire.Envelope, m)
	for s, name := range c.cfg.Sites {
		if f.Done[s] {
			continue
		}
		e, err := c.envelope(name, "", wire.KindGlobalATE, []wire.Tensor{
			wire.Scalar(tATE, res.GlobalATE), wire.Scalar(tSE, res.GlobalSE), wire.Scalar(tN, float64(total))})
		if err != nil {
			return nil, err
		}
		out[s] = e
	}
	confirmed := func(s int) error {
		f.Done[s] = true
		c.st.Step = c.step
		if err := c.save(ctx); err != nil {
			return err
		}
		c.log.Info("site confirmed the run", slog.String(LogKeySite, c.cfg.Sites[s]), slog.Uint64(wire.LogKeyRound, c.step))
		return nil
	}
	if _, err := c.exchangeSome(ctx, out, slices.Clone(f.Done), confirmed, wire.KindDone); err != nil {
		return nil, err
	}
	c.log.Info("run complete", slog.String(wire.LogKeyRun, c.st.RunID), slog.Float64("global_ate", res.GlobalATE))
	return res, nil
}

// finalWeightsFor is the envelope of site s at the current step that
// carries every model's final weights of the site, its row of Λ and the
// model's rounds, to which the site answers with its local ATE.
func (c *coordinator) finalWeightsFor(s int) (*wire.Envelope, error) {
	m := len(c.cfg.Sites)
	var ts []wire.Tensor
	for _, t := range c.st.Trained {
		p := t.Model.String() + "."
		ts = append(ts, wire.Matrices(p+pWeights, t.Weights[s])...)
		ts = append(ts, wire.Vectors(p+pShared, t.Shared)...)
		row := make([]float64, m)
		for v := range m {
			row[v] = t.Lambda.At(s, v)
		}
		ts = append(ts, wire.Vector(p+tLambda, row), wire.Scalar(p+tRounds, float64(t.Rounds)))
	}
	e, err := c.envelope(c.cfg.Sites[s], "", wire.KindWeights, ts)
	if err != nil {
		return nil, fmt.Errorf("final weights of site %s: %w", c.cfg.Sites[s], err)
	}
	return e, nil
}

// recheckATE compares the local ATE that site s answered to the final
// weights sent again on its rejoining (see rejoin) with the one recorded in
// c.st.Finish. The recorded one stands either way: the global ATE is a
// function of the recorded ones, and the sites that confirmed the run hold
// it already. A site computes its ATE as a pure function of its rows and
// the envelopes, so a difference means that its rows changed across its
// restart; it is logged, never the values.
func (c *coordinator) recheckATE(s int, e *wire.Envelope) {
	name := c.cfg.Sites[s]
	f := c.st.Finish
	ate, err := scalar(e, tATE)
	var se float64
	var n int
	if err == nil {
		se, err = scalar(e, tSE)
	}
	if err == nil {
		n, err = integer(e, tN)
	}
	switch {
	case err != nil:
		c.log.Warn("rejoined site's local ATE unreadable; keeping the recorded one", slog.String(LogKeySite, name), slog.String(LogKeyReason, err.Error()))
	case ate != f.LocalATE[s] || se != f.LocalSE[s] || n != f.Rows[s]:
		c.log.Warn("rejoined site's local ATE differs from the recorded one, which the global ATE keeps using; its rows may have changed since the run began",
			slog.String(LogKeySite, name))
	default:
		c.log.Info("rejoined site's local ATE matches the recorded one", slog.String(LogKeySite, name))
	}
}

// gatherATEs sends every site its final weights and gathers the local ATEs.
func (c *coordinator) gatherATEs(ctx context.Context) (*FinishState, error) {
	m := len(c.cfg.Sites)
	c.step++
	out := make([]*wire.Envelope, m)
	for s := range c.cfg.Sites {
		e, err := c.finalWeightsFor(s)
		if err != nil {
			return nil, err
		}
		out[s] = e
	}
	got, err := c.exchange(ctx, out, wire.KindATE)
	if err != nil {
		return nil, err
	}
	f := &FinishState{LocalATE: make([]float64, m), LocalSE: make([]float64, m), Rows: make([]int, m), Done: make([]bool, m)}
	for s, name := range c.cfg.Sites {
		e := got[s][wire.KindATE]
		if f.LocalATE[s], err = scalar(e, tATE); err != nil {
			return nil, fmt.Errorf("site %s: %w", name, err)
		}
		if f.LocalSE[s], err = scalar(e, tSE); err != nil {
			return nil, fmt.Errorf("site %s: %w", name, err)
		}
		if f.Rows[s], err = integer(e, tN); err != nil {
			return nil, fmt.Errorf("site %s: %w", name, err)
		}
	}
	return f, nil
}
