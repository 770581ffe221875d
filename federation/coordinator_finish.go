package federation

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/inference"
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
		LocalATE: slices.Clone(f.LocalATE), LocalAIPW: slices.Clone(f.AIPW), Clipped: slices.Clone(f.Clipped),
		Rows: make([]int, m), Dropped: c.st.Dropped, Selection: c.st.Selected, Sites: c.cfg.Sites,
		PrivateSites: c.st.Private}
	for s, a := range f.AIPW {
		res.Rows[s] = a.N
	}
	for i, t := range c.st.Trained {
		k := i / len(estimator.Kinds)
		if k == 0 {
			res.Models[t.Model] = t
			continue
		}
		for len(res.ExtraModels) < k {
			res.ExtraModels = append(res.ExtraModels, map[estimator.Kind]*estimator.Trained{})
		}
		res.ExtraModels[k-1][t.Model] = t
	}
	global, err := res.global()
	if err != nil {
		return nil, err
	}
	res.GATE = globalGATEs(c.cfg.Subgroups, f.Gates)
	res.Heterogeneity = globalHeterogeneity(f.Het)
	if h := res.Heterogeneity; res.Selection != nil && (h.BLP == nil || h.Policy == nil || h.Ranked == nil) {
		var absent []string
		for s, h := range f.Het {
			if h == nil || h.BLP == nil || h.Policy == nil || h.Buckets == nil {
				absent = append(absent, c.cfg.Sites[s])
			}
		}
		c.log.Info("global heterogeneity tests not pooled: some sites sent no sums (private, no held-out rows, or a small cell of the policy)",
			slog.String(wire.LogKeyRun, c.st.RunID), slog.Any(LogKeySites, absent))
	}
	for i, g := range c.cfg.Subgroups {
		var absent []string
		for s, name := range c.cfg.Sites {
			if res.GATE[i] == nil || !slices.Contains(res.GATE[i].Sites, s) {
				absent = append(absent, name)
			}
		}
		if len(absent) > 0 {
			c.log.Info("subgroup without the sums of some sites (their policy, a refused predicate or a small cell)",
				slog.String(wire.LogKeyRun, c.st.RunID), slog.String(LogKeySubgroup, g.Name), slog.Any(LogKeySites, absent))
		}
	}
	c.step++
	out := make([]*wire.Envelope, m)
	for s, name := range c.cfg.Sites {
		if f.Done[s] {
			continue
		}
		ts := append(globalTensors(global), wire.Scalar(tPrivateSites, float64(c.st.Private)))
		ts = append(ts, globalGateTensors(res.GATE, s)...)
		ts = append(ts, globalHetTensors(res.Heterogeneity)...)
		if c.st.Balance != nil {
			ts = append(ts, wire.Vector(tBalanceGlobal, c.st.Balance))
		}
		e, err := c.envelope(name, "", wire.KindGlobalATE, ts)
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
	c.log.Info("run complete", slog.String(wire.LogKeyRun, c.st.RunID), slog.Float64("global_ate", res.GlobalAIPW.Estimate),
		slog.Float64("global_ate_se", res.GlobalAIPW.SE), slog.Float64("global_plugin_ate", res.GlobalATE))
	return res, nil
}

// finalWeightsFor is the envelope of site s at the current step that
// carries every model's final weights of the site (of every kernel), its row of Λ and the
// model's rounds, and the tensors extra. Without extra, the site answers
// with its local ATE, and the envelope carries the run's model selection
// when it made one.
func (c *coordinator) finalWeightsFor(s int, extra ...wire.Tensor) (*wire.Envelope, error) {
	m := len(c.cfg.Sites)
	var ts []wire.Tensor
	for i, t := range c.st.Trained {
		p := modelName(t.Model, i/len(estimator.Kinds)) + "."
		ts = append(ts, wire.Matrices(p+pWeights, t.Weights[s])...)
		ts = append(ts, wire.Vectors(p+pShared, t.Shared)...)
		row := make([]float64, m)
		for v := range m {
			row[v] = t.Lambda.At(s, v)
		}
		ts = append(ts, wire.Vector(p+tLambda, row), wire.Scalar(p+tRounds, float64(t.Rounds)))
	}
	if len(extra) == 0 {
		if c.st.Selected != nil && c.st.Selected.Scored {
			var err error
			if extra, err = c.st.Selected.choiceTensors(s); err != nil {
				return nil, err
			}
		}
		extra = append(extra, subgroupTensors(c.cfg.Subgroups)...)
	}
	e, err := c.envelope(c.cfg.Sites[s], "", wire.KindWeights, append(ts, extra...))
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
	ate, sums, clipped, err := decodeLocal(e)
	switch {
	case err != nil:
		c.log.Warn("rejoined site's local ATE unreadable; keeping the recorded one", slog.String(LogKeySite, name), slog.String(LogKeyReason, err.Error()))
	case sums.NoiseVar > 0 && (sums.N != f.AIPW[s].N || sums.NoiseVar != f.AIPW[s].NoiseVar):
		// A private site noises its sums afresh (and is charged again
		// for it): only the row count and the noise can match.
		c.log.Warn("rejoined private site's row count or noise differs from the recorded one, which the global ATE keeps using; its rows may have changed since the run began",
			slog.String(LogKeySite, name))
	case sums.NoiseVar > 0:
		c.log.Info("rejoined private site's row count and noise match the recorded ones", slog.String(LogKeySite, name))
	case ate != f.LocalATE[s] || sums != f.AIPW[s] || clipped != f.Clipped[s]:
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
	f := &FinishState{LocalATE: make([]float64, m), AIPW: make([]inference.Sums, m), Clipped: make([]int, m), Done: make([]bool, m)}
	for s, name := range c.cfg.Sites {
		if f.LocalATE[s], f.AIPW[s], f.Clipped[s], err = decodeLocal(got[s][wire.KindATE]); err == nil && f.AIPW[s].N > c.siteRows(s) {
			// The sites are sent the sum of the counts, which must stay
			// a count they read.
			err = fmt.Errorf("%w: local ATE over %d rows, more than the site's %d", ErrProtocol, f.AIPW[s].N, c.siteRows(s))
		}
		if err == nil && len(c.cfg.Subgroups) > 0 {
			if f.Gates == nil {
				f.Gates = make([][]*GateSums, m)
			}
			f.Gates[s], err = decodeGateSums(got[s][wire.KindATE], len(c.cfg.Subgroups), c.siteRows(s))
		}
		if err == nil {
			if f.Het == nil {
				f.Het = make([]*HetSums, m)
			}
			f.Het[s], err = decodeHetSums(got[s][wire.KindATE], c.siteRows(s))
		}
		if err != nil {
			return nil, &SitesError{Sites: []string{name}, Err: fmt.Errorf("site %s: %w", name, err)}
		}
	}
	return f, nil
}

// global sets the global ATEs of r from the sites' answers: the plug-in ATE
// weighted by rows, and the AIPW estimate of the added sums, which is the
// estimate over the pooled rows, with the stratified standard error
// (inference.Stratified). It returns them as the global-ate
// envelope carries them.
func (r *Result) global() (inference.ATEs, error) {
	var err error
	if r.GlobalATE, err = estimator.GlobalATE(r.LocalATE, r.Rows); err != nil {
		return inference.ATEs{}, err
	}
	var sums inference.Sums
	clipped := 0
	for s := range r.LocalAIPW {
		sums = sums.Add(r.LocalAIPW[s])
		clipped += r.Clipped[s]
	}
	// The sites' sizes are fixed by design: the stratified variance.
	if r.GlobalAIPW, err = inference.Stratified(r.LocalAIPW); err != nil {
		return inference.ATEs{}, fmt.Errorf("global AIPW ATE: %w", err)
	}
	return inference.ATEs{AIPW: r.GlobalAIPW, Clipped: clipped, PlugIn: inference.PointEstimate(r.GlobalATE, sums.N)}, nil
}
