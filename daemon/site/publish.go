package site

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/crffd/crffd/balance"
	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/heterogeneity"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/pipeline"
	"github.com/crffd/crffd/selection"
	"github.com/crffd/crffd/store"
)

// publish is the federation.SiteConfig.Publish hook: it publishes run r
// (publishRun), then records its loss history, a diagnostic whose failure
// does not fail the run.
func (s *federated) publish(ctx context.Context, r *federation.SiteResult) error {
	if err := s.publishRun(ctx, r); err != nil {
		return err
	}
	if err := s.cfg.DB.AppendLoss(ctx, r.RunID, pipeline.FiniteLosses(s.losses)...); err != nil {
		s.log.Warn("loss history not recorded", slog.String(logKeyRun, r.RunID), slog.String(logKeyError, err.Error()))
	}
	return nil
}

// publishRun writes a run's model and results as crffd fit does, and its
// balance, a diagnostic whose failure does not fail the run. A run
// published already (the coordinator restarted after the site published
// but before it heard the site's done) is left as it is: its results are
// a deterministic function of the run.
func (s *federated) publishRun(ctx context.Context, r *federation.SiteResult) error {
	db, recs := s.cfg.DB, s.recs
	if cur, err := db.CurrentRun(ctx); err == nil && cur.ID == r.RunID {
		s.log.Info("run published already", slog.String(logKeyRun, r.RunID))
		return nil
	}
	if err := db.BeginRun(ctx, r.RunID, recs.Layout); err != nil {
		return err
	}
	fitted, err := keptFitted(s.kernels, r)
	if err != nil {
		return err
	}
	rounds := map[string]int{}
	for k, n := range r.Rounds {
		rounds[k.String()] = n
	}
	pipeline.WarnUncalibrated(s.log, db.Path(), len(r.Kept), r.Calibration)
	ns, err := pipeline.KeptNuisance(ctx, r.Models[0].Setup, recs.Data.Subset(r.Kept), r.Stack)
	if err != nil {
		return err
	}
	results := s.results(r)
	if results.Heterogeneity, err = heterogeneityTests(recs, r, s.f.PolicyThresholds); err != nil {
		return fmt.Errorf("heterogeneity: %w", err)
	}
	run := pipeline.Run{ID: r.RunID, Records: recs, Fitted: fitted,
		Setup:   modelstore.Setup{Config: r.Setup.Config, Scaler: r.Setup.Scaler, Site: r.Index, Sites: r.Sites, Rounds: rounds},
		Effects: r.Effects, CATE: r.CATE, Scores: pipeline.Scores{PSI: r.Scores, Clipped: r.ScoreClipped}, Calibration: r.Calibration,
		Nuisance: ns, Results: results, Logger: s.log}
	if err := pipeline.Publish(ctx, db, run); err != nil {
		return err
	}
	s.log.Info("published federated results", slog.String(logKeyRun, r.RunID), slog.Int(logKeyRows, recs.Len()))
	if err := publishBalance(ctx, db, recs, r); err != nil {
		s.log.Warn("balance diagnostics not recorded", slog.String(logKeyRun, r.RunID), slog.String(logKeyError, err.Error()))
	}
	return nil
}

// heterogeneityTests returns the local heterogeneity tests of run r on the
// rows its model selection held out of training (pipeline.Heterogeneity),
// or nil for a run without model selection or with too few of them.
func heterogeneityTests(recs *store.Records, r *federation.SiteResult, thresholds []float64) (*store.Heterogeneity, error) {
	if r.Selection == nil || len(r.Held) == 0 || r.Control == nil {
		return nil, nil
	}
	held := make([]int, len(r.Held))
	for i, p := range r.Held {
		held[i] = r.Kept[p]
	}
	h, _, err := pipeline.Heterogeneity(pipeline.HeterogeneityInput{Held: held, PSI: r.Scores, Control: r.Control, CATE: r.CATE,
		Calibration: r.Calibration, X: recs.Data.X, Columns: recs.Layout.Covariates, Thresholds: thresholds})
	if err != nil {
		return nil, err
	}
	return withGlobal(h, r.GlobalHeterogeneity), nil
}

// withGlobal returns h with the run's global tests of heterogeneity g
// added (scope global): the BLP and the value of heterogeneity.RuleLowerAbove0
// over every site's held-out rows.
func withGlobal(h *store.Heterogeneity, g federation.GlobalHeterogeneity) *store.Heterogeneity {
	if g.BLP == nil && g.Policy == nil && g.Ranked == nil {
		return h
	}
	if h == nil {
		h = &store.Heterogeneity{}
	}
	if b := g.BLP; b != nil {
		h.Stats = append(h.Stats, store.HetStat{Scope: store.ScopeGlobal, Statistic: "blp_ate", Estimate: b.ATE, PValue: -1},
			store.HetStat{Scope: store.ScopeGlobal, Statistic: "blp_het", Estimate: b.Het, PValue: b.HetP})
	}
	if p := g.Policy; p != nil {
		h.Policy = append(h.Policy, store.Policy{Scope: store.ScopeGlobal, Policy: heterogeneity.RuleLowerAbove0, Treats: p.Share,
			Value: p.Value, GainNone: p.GainOverNone, GainAll: p.GainOverAll})
	}
	if r := g.Ranked; r != nil {
		h.Stats = append(h.Stats, pipeline.RankedStats(store.ScopeGlobal, r.GATES, r.TopMinusLow, r.RATE)...)
	}
	return h
}

// keptFitted returns the models of run r that the site keeps: its own
// kernel's, and those of the further kernels the chosen estimator's
// members need (pipeline.KeptModels). kernels are the site's kernels,
// among them those the run trained (r.Kernels, by pipeline.KernelLabel).
func keptFitted(kernels []modelstore.Kernel, r *federation.SiteResult) (pipeline.Fitted, error) {
	est := selection.Estimator{Kind: selection.KindLatent}
	if r.Selection != nil {
		est = r.Selection.Estimator
	}
	est, used := pipeline.KeptModels(est, 0)
	own, err := runKernel(kernels, r.Kernels[0])
	if err != nil {
		return pipeline.Fitted{}, err
	}
	f := pipeline.Fitted{Models: []*estimator.Model{r.Models[0]}, Kernels: []modelstore.Kernel{own}, Estimator: est}
	for _, k := range used {
		mk, err := runKernel(kernels, r.Kernels[k])
		if err != nil {
			return pipeline.Fitted{}, err
		}
		f.Models, f.Kernels = append(f.Models, r.Models[k]), append(f.Kernels, mk)
	}
	return f, nil
}

// results are the results of run r besides its CATEs: the local and
// global ATEs, the model selection and the transfer factors.
func (s *federated) results(r *federation.SiteResult) store.Results {
	global := pipeline.ATERows(store.ScopeGlobal, r.Global)
	for i := range global {
		// The run's sites: with coordinator.min_sites, perhaps fewer than
		// the coordinator lists.
		global[i].Sites = runSites(r)
		global[i].Private = r.PrivateSites > 0
	}
	local := pipeline.ATERows(store.ScopeLocal, r.Local)
	for i := range local {
		local[i].Private = r.Private
	}
	if r.PrivateSites > 0 {
		s.log.Info("the run's global AIPW interval includes the noise its private sites added to their sums (crff_ate.noise_se), not the bias of their clipping, nor the training noise's effect on the models; crff_ate marks it private",
			slog.Int(logKeySites, r.PrivateSites), slog.Float64(logKeyNoiseSE, r.Global.AIPW.NoiseSE))
	}
	if rel := r.Released; rel != nil {
		s.log.Info("the ATE's sums were released with noise; the local crff_ate rows are this site's exact ones",
			slog.Float64(logKeyPsiClip, rel.PsiClip), slog.Int(logKeyPsiClipped, rel.PsiClipped), slog.Float64(logKeyCATEClip, rel.CATEClip),
			slog.Int(logKeyCATEClipped, rel.CATEClipped), slog.Float64(logKeyNoiseSD, rel.NoiseSD[0]), slog.Int(logKeyRows, rel.Sums.N))
	}
	res := store.Results{ATE: append(local, global...), Transfer: transfers(r), Nuisance: pipeline.NuisanceRows(r.Stack), GATE: globalGATEs(r)}
	if sel := r.Selection; sel != nil {
		res.Selection = pipeline.SelectionRows(sel.Candidates, func(k int) string { return r.Kernels[k] }, sel.HeldAll, sel.Site)
	}
	return res
}

// globalGATEs are the crff_gate rows of the subgroups the run's
// coordinator named: their global effects over the sites that evaluated
// them, named, or the reason there is none.
func globalGATEs(r *federation.SiteResult) []store.GATE {
	out := make([]store.GATE, len(r.Subgroups))
	for i, g := range r.Subgroups {
		out[i] = store.GATE{Scope: store.ScopeGlobal, Subgroup: g.Name}
		var gl *federation.GlobalGATE
		if i < len(r.GlobalGATE) {
			gl = r.GlobalGATE[i]
		}
		switch {
		case gl == nil:
			out[i].Reason = "no site evaluated it: each site's policy (site.subgroups), a refused predicate, or a small cell (federation.min_arm_rows)"
			continue
		case gl.Withheld:
			out[i].Reason = "withheld: fewer than two other sites evaluated it, whose figures this site could then single out from its own"
			continue
		}
		out[i].N, out[i].Treated, out[i].Control, out[i].Estimate, out[i].PlugIn = gl.N, gl.Treated, gl.Control, gl.Estimate, gl.PlugIn
		out[i].Sites = make([]string, len(gl.Sites))
		for j, s := range gl.Sites {
			out[i].Sites[j] = fmt.Sprint(s + 1)
			if s < len(r.Peers) && r.Peers[s] != "" {
				out[i].Sites[j] = r.Peers[s]
			}
		}
	}
	return out
}

// transfers are the transfer factors λ of r's models from the other
// sites to this one.
func transfers(r *federation.SiteResult) []store.Transfer {
	var out []store.Transfer
	for _, k := range estimator.Kinds {
		for v, l := range r.Lambda[k] {
			if v != r.Index {
				// Peers are named by their position in the coordinator's
				// coordinator.sites list: site names never reach a site.
				peer := fmt.Sprintf("#%d", v+1) // a coordinator that does not name the sites
				if v < len(r.Peers) && r.Peers[v] != "" {
					peer = r.Peers[v]
				}
				out = append(out, store.Transfer{Peer: peer, Model: k.String(), Lambda: l})
			}
		}
	}
	return out
}

// publishBalance records the balance of the site's rows of run r (scope
// local) and, when every site sent its sums, of all the sites' rows (scope
// global) in crff_balance.
func publishBalance(ctx context.Context, db *store.Site, recs *store.Records, r *federation.SiteResult) error {
	// The sums of the site's hello, when it sent them, are of the same
	// rows: no second propensity fit.
	if _, err := db.CheckBalance(ctx, recs, r.LocalBalance); err != nil {
		return err
	}
	if r.Balance == nil {
		return nil
	}
	l := recs.Layout
	g, err := balance.Summarise(*r.Balance, l.Covariates, l.Binary, l.Treatment)
	if err != nil {
		return err
	}
	return db.WriteBalance(ctx, store.Balance{Scope: store.ScopeGlobal, At: time.Now(), Run: r.RunID, Sites: r.Sites, LeftOut: -1, Report: g})
}

// runSites returns the names of the sites of r's run, or nil when the
// coordinator did not name them all.
func runSites(r *federation.SiteResult) []string {
	if len(r.Peers) != r.Sites || slices.Contains(r.Peers, "") {
		return nil
	}
	return slices.Clone(r.Peers)
}

// runKernel returns the kernel of kernels whose label is name.
func runKernel(kernels []modelstore.Kernel, name string) (modelstore.Kernel, error) {
	// A kernel at a transfer grid point was trained with its base
	// kernel's plugin (federation's openKernels).
	base, transfer := selection.SplitTransfer(name)
	for _, k := range kernels {
		if pipeline.KernelLabel(k) == base {
			k.Transfer = transfer
			return k, nil
		}
	}
	return modelstore.Kernel{}, fmt.Errorf("the run chose a model of kernel %q, which this site does not have", name)
}
