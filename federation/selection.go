package federation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/selection"
)

// Selection configures model selection in a run (package selection). Each
// site holds Share of its kept rows out of training (selection.Holdout,
// keyed by the model seed); after training the sites send the ridge
// statistics of their training rows (stats), then each candidate's loss
// sums over their held-out rows (losses), and the coordinator chooses the
// estimator every site reports. The zero value turns selection off: the
// sites train on every kept row and report the latent CATE.
type Selection struct {
	// Share is the share of each site's kept rows held out, in (0, 1);
	// zero turns selection off.
	Share float64
	// Kinds are the candidate kinds (selection.Options.Kinds); empty means
	// every kind.
	Kinds []string
	// Ridge are the ridge candidates' penalties; nil means
	// selection.DefaultRidge.
	Ridge []float64
	// Z is the ensemble's threshold (selection.Combine).
	Z float64
	// BySite gives each site the ensemble of its own choice
	// (selection.CombineBySite), sent to it alone, rather than the
	// federation's.
	BySite bool
	// Kernel names the run's kernel in candidate names; the further
	// kernels' names are CoordinatorConfig.Extra's.
	Kernel string
}

// On reports whether the run selects a model.
func (s Selection) On() bool { return s.Share != 0 }

// check returns an error unless s is off or a valid configuration.
func (s Selection) check() error {
	if !s.On() {
		return nil
	}
	if !(s.Share > 0 && s.Share < 1) {
		return fmt.Errorf("federation: validation share %v, want one in (0, 1)", s.Share)
	}
	if !(s.Z >= 0) {
		return fmt.Errorf("federation: selection threshold %v, want ≥ 0", s.Z)
	}
	for _, k := range s.Kinds {
		if kindCode(k) < 0 {
			return fmt.Errorf("federation: unknown candidate kind %q", k)
		}
	}
	for _, r := range s.Ridge {
		if !(r > 0) || math.IsInf(r, 0) {
			return fmt.Errorf("federation: ridge penalty %v, want one > 0", r)
		}
	}
	return nil
}

func (s Selection) wants(kind string) bool {
	return len(s.Kinds) == 0 || slices.Contains(s.Kinds, kind)
}

// SelectState is what a run's model selection has learned: the candidates
// once the sites' statistics are in, their scores and the choice once the
// sites' losses are.
type SelectState struct {
	Candidates []selection.Candidate
	Estimators []selection.Estimator
	Scored     bool // the Candidates' scores, Chosen, Ensemble and Held are set
	Chosen     int
	// Ensemble is the chosen ensemble, with each site's shift (Sites, in
	// the order of Config.Sites).
	Ensemble selection.Ensemble
	Held     int // every site's held-out rows
}

// Shift returns the chosen ensemble's shift at site s. A state saved
// before shifts were per site kept one, in the ensemble's Estimator.
func (st *SelectState) Shift(s int) float64 {
	if s >= 0 && s < len(st.Ensemble.Sites) {
		return st.Ensemble.Sites[s].Shift
	}
	return st.Estimators[st.Chosen].Shift
}

// Shifts returns the chosen ensemble's shift at every one of m sites.
func (st *SelectState) Shifts(m int) []float64 {
	out := make([]float64, m)
	for s := range out {
		out[s] = st.Shift(s)
	}
	return out
}

// SiteSelection is a run's model selection as a site learns it.
type SiteSelection struct {
	Candidates []selection.Candidate // scored over every site's held-out rows
	Chosen     int
	Estimator  selection.Estimator // the chosen candidate, whose CATE SiteResult.CATE holds
	HeldAll    int                 // every site's held-out rows (this site's: SiteResult.Held)
	// Site says how the site's own choice came about, under a choice per
	// site (Selection.BySite); nil otherwise.
	Site *selection.SiteScores
}

// ErrNoHeldOut reports a run that selects a model while no site could hold
// rows out to choose on.
var ErrNoHeldOut = errors.New("federation: no held-out rows")

// The kinds of candidate as the wire codes them. Their values are part of
// the protocol.
var kindCodes = []string{selection.KindLatent, selection.KindOutcome, selection.KindTLearner, selection.KindDR, selection.KindEnsemble,
	selection.KindSiteTLearner, selection.KindSiteDR}

func kindCode(kind string) int { return slices.Index(kindCodes, kind) }

// Tensors of model selection.
const (
	tSelectShare  = "selection.share"   // hello, and the site's answer: the held-out share (0: off)
	tSelectStage  = "selection.stage"   // final weights: 1 asks for stats, 2 for losses, 3 carries the choice
	tSelectDR     = "selection.dr"      // stage 1: 1 when the DR-learner's statistics are wanted
	tCandKind     = "candidates.kind"   // stages 2, 3: each candidate's kind (kindCodes)
	tCandRidge    = "candidates.ridge"  // stages 2, 3: each candidate's penalty (0 for none)
	tCandKernel   = "candidates.kernel" // stages 2, 3: each candidate's kernel (0, the run's, when absent)
	pCand         = "candidate."        // stage 2: candidate.<c>.<regression>.…
	pChosen       = "chosen."           // stage 3: the chosen estimator
	tSelectLoss   = "selection.loss"    // stage 3: each candidate's mean loss, its SE, its paired difference and SE
	tSelectSE     = "selection.se"
	tSelectDiff   = "selection.diff"
	tSelectDiffSE = "selection.diff_se"
	tSelectChosen = "selection.chosen"  // stage 3: the chosen candidate's index
	tSelectN      = "selection.n"       // stage 3: every site's held-out rows
	tSelectMember = "selection.members" // stage 3: the ensemble's members, whose estimators follow as chosen.<j>.…
	tSelectShift  = "selection.shift"   // stage 3: the ensemble's shift at the receiving site
	// stage 3, under a choice per site: the receiving site's best
	// candidate, and each candidate's pooled difference from it there
	// (selection.SiteScores), the ensemble excluded
	tSelectSiteBest   = "selection.site_best"
	tSelectSiteDiff   = "selection.site_diff"
	tSelectSiteDiffSE = "selection.site_diff_se"
	pStats            = "stats."           // stats: stats.<arm0|arm1|dr>.<n|featsum|targetsum|gram|moment>
	tLossN            = "losses.n"         // losses: the held-out rows, and their selection.Pairs
	tPairLoss         = "losses.pair_loss" // losses: selection.Pairs, C×C row by row
	tPairRes          = "losses.pair_res"
	tCentreN          = "centre.n" // losses: selection.Centre of all the site's rows
	tCentrePsi        = "centre.psi"
	tCentrePsiSq      = "centre.psisq"
	tCentreCATE       = "centre.cate"
	tCentreRes        = "centre.res"   // losses, from a private site: each candidate's Σ(ψ − τ̂) over all its rows, clipped
	tCentreResSq      = "centre.ressq" // and Σ(ψ − τ̂)²
)

// statsNames are the ridge statistics' names on the wire, as Stats holds them.
var statsNames = []string{"arm0", "arm1", "dr"}

func statsTensors(st selection.Stats) []wire.Tensor {
	var ts []wire.Tensor
	for i, r := range []*estimator.RidgeStats{st.Arms[0], st.Arms[1], st.DR} {
		if r == nil {
			continue
		}
		p := pStats + statsNames[i] + "."
		ts = append(ts, wire.Scalar(p+"n", r.N), wire.Vector(p+"featsum", r.FeatSum), wire.Scalar(p+"targetsum", r.TargetSum),
			wire.Tensor{Name: p + "gram", Shape: []int{r.P, r.P}, Values: r.Gram}, wire.Vector(p+"moment", r.Moment))
	}
	return ts
}

// decodeStats reads a stats envelope over features features (the reference
// model's outcome features, which size the pooled statistics); dr says
// whether it must hold the DR-learner's statistics.
func decodeStats(e *wire.Envelope, dr bool, features int) (selection.Stats, error) {
	var st selection.Stats
	for i, name := range statsNames {
		if i == 2 && !dr {
			break
		}
		p := pStats + name + "."
		featSum, err := vector(e, p+"featsum", -1)
		if err != nil {
			return st, err
		}
		n := len(featSum)
		if n != features {
			return st, fmt.Errorf("%w: %s statistics of %d features, the model has %d", ErrProtocol, name, n, features)
		}
		r := &estimator.RidgeStats{P: n, FeatSum: featSum}
		if r.N, err = scalar(e, p+"n"); err != nil {
			return st, err
		}
		if r.TargetSum, err = scalar(e, p+"targetsum"); err != nil {
			return st, err
		}
		if r.Gram, err = vector(e, p+"gram", n*n); err != nil {
			return st, err
		}
		if r.Moment, err = vector(e, p+"moment", n); err != nil {
			return st, err
		}
		if i < 2 {
			st.Arms[i] = r
		} else {
			st.DR = r
		}
	}
	v, err := noiseVariances(e, tStatsNoise, len(st.Noise))
	if err != nil {
		return st, err
	}
	copy(st.Noise[:], v)
	if !dr {
		st.Noise[2] = 0
	}
	return st, nil
}

func ridgeTensors(prefix string, r estimator.Ridge) []wire.Tensor {
	return []wire.Tensor{wire.Scalar(prefix+"intercept", r.Intercept), wire.Vector(prefix+"beta", r.Beta)}
}

func decodeRidge(e *wire.Envelope, prefix string) (*estimator.Ridge, error) {
	var r estimator.Ridge
	var err error
	if r.Intercept, err = scalar(e, prefix+"intercept"); err != nil {
		return nil, err
	}
	if r.Beta, err = vector(e, prefix+"beta", -1); err != nil {
		return nil, err
	}
	return &r, nil
}

// estimatorTensors encodes an estimator's regressions under prefix; the
// kind and penalty travel in candidates.kind and candidates.ridge.
func estimatorTensors(prefix string, est selection.Estimator) []wire.Tensor {
	switch {
	case est.Arms != nil:
		return append(ridgeTensors(prefix+"arm0.", est.Arms[0]), ridgeTensors(prefix+"arm1.", est.Arms[1])...)
	case est.DR != nil:
		return ridgeTensors(prefix+"dr.", *est.DR)
	}
	return nil
}

// decodeEstimator reads the estimator of kind and penalty ridge under prefix.
func decodeEstimator(e *wire.Envelope, prefix string, kind string, ridge float64) (selection.Estimator, error) {
	est := selection.Estimator{Kind: kind, Ridge: ridge}
	switch kind {
	case selection.KindTLearner:
		var arms [2]estimator.Ridge
		for a, name := range []string{"arm0.", "arm1."} {
			r, err := decodeRidge(e, prefix+name)
			if err != nil {
				return est, err
			}
			arms[a] = *r
		}
		est.Arms = &arms
	case selection.KindDR:
		r, err := decodeRidge(e, prefix+"dr.")
		if err != nil {
			return est, err
		}
		est.DR = r
	}
	return est, nil
}

// decodeEnsemble reads the chosen ensemble of stage 3, marking its
// members among cands.
func decodeEnsemble(e *wire.Envelope, cands []selection.Candidate) (selection.Estimator, error) {
	est := selection.Estimator{Kind: selection.KindEnsemble}
	members, err := vector(e, tSelectMember, -1)
	if err != nil {
		return est, err
	}
	if len(members) == 0 {
		return est, fmt.Errorf("%w: an ensemble without members", ErrProtocol)
	}
	if len(members) >= len(cands) {
		// The ensemble is a candidate itself, and no member.
		return est, fmt.Errorf("%w: an ensemble of %d members among %d candidates", ErrProtocol, len(members), len(cands))
	}
	for j, v := range members {
		i := int(v)
		if v != math.Trunc(v) || i < 0 || i >= len(cands) || cands[i].Kind == selection.KindEnsemble || cands[i].Member {
			return est, fmt.Errorf("%w: ensemble member %v of %d candidates", ErrProtocol, v, len(cands))
		}
		cands[i].Member = true
		m, err := decodeEstimator(e, fmt.Sprintf("%s%d.", pChosen, j), cands[i].Kind, cands[i].Ridge)
		if err != nil {
			return est, err
		}
		est.Members = append(est.Members, selection.Member{Estimator: m, Kernel: cands[i].Kernel, Candidate: i})
	}
	if est.Shift, err = scalar(e, tSelectShift); err != nil {
		return est, err
	}
	return est, nil
}

// candidateTensors lists the candidates' kinds, penalties and kernels.
func candidateTensors(cands []selection.Candidate) []wire.Tensor {
	kinds, ridge, kernel := make([]float64, len(cands)), make([]float64, len(cands)), make([]float64, len(cands))
	for c, cand := range cands {
		kinds[c], ridge[c], kernel[c] = float64(kindCode(cand.Kind)), cand.Ridge, float64(cand.Kernel)
	}
	return []wire.Tensor{wire.Vector(tCandKind, kinds), wire.Vector(tCandRidge, ridge), wire.Vector(tCandKernel, kernel)}
}

// decodeCandidates reads the candidates' kinds, penalties and kernels,
// naming them with kernels, the names of the run's kernels by index. More
// than most candidates (Limits.Candidates) are refused before anything is
// allocated for them.
func decodeCandidates(e *wire.Envelope, kernels []string, most int) ([]selection.Candidate, error) {
	kinds, err := vector(e, tCandKind, -1)
	if err != nil {
		return nil, err
	}
	if len(kinds) > most {
		return nil, overLimit("candidate count", len(kinds), most, "candidates")
	}
	ridge, err := vector(e, tCandRidge, len(kinds))
	if err != nil {
		return nil, err
	}
	if len(kinds) == 0 {
		return nil, fmt.Errorf("%w: %s names no candidate", ErrProtocol, e.Kind)
	}
	kernel := make([]float64, len(kinds))
	if _, ok := e.Tensor(tCandKernel); ok {
		if kernel, err = vector(e, tCandKernel, len(kinds)); err != nil {
			return nil, err
		}
	}
	out := make([]selection.Candidate, len(kinds))
	for c, k := range kinds {
		if k != math.Trunc(k) || k < 0 || int(k) >= len(kindCodes) {
			return nil, fmt.Errorf("%w: candidate %d of unknown kind %v", ErrProtocol, c, k)
		}
		kind := kindCodes[int(k)]
		// The ensemble is listed with its first member's kernel
		// (selection.Ensembled), which may be a further kernel's.
		kn := kernel[c]
		if kn != math.Trunc(kn) || kn < 0 || int(kn) >= len(kernels) || (kn != 0 && kind != selection.KindLatent && kind != selection.KindOutcome && kind != selection.KindEnsemble) {
			return nil, fmt.Errorf("%w: candidate %d (%s) of kernel %v, in a run of %d kernels", ErrProtocol, c, kind, kn, len(kernels))
		}
		out[c] = selection.Candidate{Name: selection.CandidateName(kind, kernels[int(kn)], ridge[c]), Kind: kind, Ridge: ridge[c], Kernel: int(kn)}
	}
	return out, nil
}

// siteSumsTensors encodes a site's answer to stage 2.
func siteSumsTensors(s selection.SiteSums) []wire.Tensor {
	ts := []wire.Tensor{wire.Scalar(tLossN, s.Pairs.N), wire.Vector(tPairLoss, s.Pairs.Loss), wire.Vector(tPairRes, s.Pairs.Res),
		wire.Scalar(tCentreN, s.Centre.N), wire.Scalar(tCentrePsi, s.Centre.Psi), wire.Scalar(tCentrePsiSq, s.Centre.PsiSq),
		wire.Vector(tCentreCATE, s.Centre.CATE)}
	if s.Centre.Res != nil {
		ts = append(ts, wire.Vector(tCentreRes, s.Centre.Res), wire.Vector(tCentreResSq, s.Centre.ResSq))
	}
	return ts
}

// decodeSiteSums reads a site's answer to stage 2 for c candidates, from
// a site of rows kept rows, which bound its counts.
func decodeSiteSums(e *wire.Envelope, c, rows int) (selection.SiteSums, error) {
	out := selection.SiteSums{Pairs: selection.Pairs{C: c}}
	var err error
	for _, f := range []struct {
		name  string
		v     *float64
		count bool
	}{{tLossN, &out.Pairs.N, true}, {tCentreN, &out.Centre.N, true}, {tCentrePsi, &out.Centre.Psi, false}, {tCentrePsiSq, &out.Centre.PsiSq, false}} {
		if *f.v, err = scalar(e, f.name); err != nil {
			return out, err
		}
		if f.count && (*f.v < 0 || *f.v != math.Trunc(*f.v)) {
			return out, fmt.Errorf("%w: %s %v is not a count", ErrProtocol, f.name, *f.v)
		}
		if f.count && *f.v > float64(rows) {
			return out, fmt.Errorf("%w: %s %v is more than the site's %d rows", ErrProtocol, f.name, *f.v, rows)
		}
	}
	if out.Pairs.Loss, err = vector(e, tPairLoss, c*c); err != nil {
		return out, err
	}
	if out.Pairs.Res, err = vector(e, tPairRes, c*c); err != nil {
		return out, err
	}
	if out.Centre.CATE, err = vector(e, tCentreCATE, c); err != nil {
		return out, err
	}
	// A private site's centring sums are of its clipped residuals.
	if _, ok := e.Tensor(tCentreRes); ok {
		if out.Centre.Res, err = vector(e, tCentreRes, c); err != nil {
			return out, err
		}
		if out.Centre.ResSq, err = vector(e, tCentreResSq, c); err != nil {
			return out, err
		}
	}
	v, err := noiseVariances(e, tLossNoise, 4)
	if err != nil || v == nil {
		return out, err
	}
	out.Pairs.ResVar, out.Pairs.LossVar, out.Centre.ResVar, out.Centre.ResSqVar = v[0], v[1], v[2], v[3]
	return out, nil
}

// selectModel runs model selection's two steps, stats and losses, unless a
// resumed state has finished them, and saves what each learned.
func (c *coordinator) selectModel(ctx context.Context) error {
	sel := c.st.Select
	if !sel.On() || (c.st.Selected != nil && c.st.Selected.Scored) {
		return nil
	}
	if c.st.Selected == nil {
		c.step++
		local, localDR := selection.LocalStatsWanted(sel.Kinds, sel.BySite)
		dr := sel.wants(selection.KindDR) || localDR
		out, err := c.finalEnvelopes(wire.Scalar(tSelectStage, 1), wire.Scalar(tSelectDR, b2f(dr)))
		if err != nil {
			return err
		}
		got, err := c.exchange(ctx, out, wire.KindStats)
		if err != nil {
			return err
		}
		st := &SelectState{}
		st.Candidates, st.Estimators = selection.KernelCandidates(c.kernelNames(), sel.Kinds)
		ridge := selection.Penalties(sel.Ridge)
		if len(ridge) > 0 && (sel.wants(selection.KindTLearner) || dr || local) {
			var pooled selection.Stats
			features := (&estimator.Model{Setup: c.setups[0]}).OutcomeFeatureCount()
			for s, name := range c.cfg.Sites {
				site, err := decodeStats(got[s][wire.KindStats], dr, features)
				if err == nil {
					err = pooled.Add(site)
				}
				if err != nil {
					return &SitesError{Sites: []string{name}, Err: fmt.Errorf("site %s: %w", name, err)}
				}
			}
			cands, ests, err := selection.RidgeCandidates(pooled, ridge, sel.Kinds)
			switch {
			case err != nil && pooled.Noise != [3]float64{}:
				// Private sites' noise can leave too little of the sums
				// to solve (a noised row count below one): the run
				// chooses among the other candidates.
				c.log.Warn("ridge candidates left out: the private sites' noised statistics cannot be solved",
					slog.String(wire.LogKeyRun, c.st.RunID), slog.String(LogKeyReason, err.Error()))
			case err != nil:
				return err
			default:
				st.Candidates, st.Estimators = append(st.Candidates, cands...), append(st.Estimators, ests...)
			}
			if local && pooled.Noise == [3]float64{} {
				// Each site solves these from its own statistics; a
				// private site's exact ones would leak into its losses
				// (selection.Estimator.Localise), so runs with private
				// sites go without.
				cands, ests := selection.LocalCandidates(ridge, sel.Kinds)
				st.Candidates, st.Estimators = append(st.Candidates, cands...), append(st.Estimators, ests...)
			}
		}
		if len(st.Candidates) == 0 {
			return fmt.Errorf("federation: no candidate of kinds %v", sel.Kinds)
		}
		c.st.Selected, c.st.Step = st, c.step
		if err := c.save(ctx); err != nil {
			return err
		}
	}
	st := c.st.Selected
	c.step++
	out, err := c.finalEnvelopes(st.lossTensors()...)
	if err != nil {
		return err
	}
	got, err := c.exchange(ctx, out, wire.KindLosses)
	if err != nil {
		return err
	}
	var pairs selection.Pairs
	centres := make([]selection.Centre, len(c.cfg.Sites))
	perSite := make([]selection.Pairs, len(c.cfg.Sites))
	for s, name := range c.cfg.Sites {
		site, err := decodeSiteSums(got[s][wire.KindLosses], len(st.Candidates), c.siteRows(s))
		if err == nil {
			err = pairs.Add(site.Pairs)
		}
		if err != nil {
			return &SitesError{Sites: []string{name}, Err: fmt.Errorf("site %s: %w", name, err)}
		}
		centres[s], perSite[s] = site.Centre, site.Pairs
	}
	if pairs.N < 2 {
		return fmt.Errorf("%w: the sites hold %v rows out for model selection, too few to choose on: every site is too small for model.validation %v within its federation.min_arm_rows (set model.estimator: latent)",
			ErrNoHeldOut, pairs.N, sel.Share)
	}
	scores, ens, err := selection.Decide(pairs, centres, sel.Z)
	if err != nil {
		return err
	}
	if sel.BySite {
		if ens, err = selection.CombineBySite(ens, perSite, centres, sel.Z); err != nil {
			return err
		}
	}
	st.Candidates, st.Estimators = selection.Ensembled(st.Candidates, st.Estimators, scores, ens)
	chosen := len(st.Candidates) - 1
	st.Chosen, st.Scored, st.Ensemble, st.Held = chosen, true, ens, int(pairs.N)
	c.st.Step = c.step
	if err := c.save(ctx); err != nil {
		return err
	}
	won := st.Candidates[chosen]
	c.log.Info("model selected", slog.String(wire.LogKeyRun, c.st.RunID), slog.String("candidate", won.Name),
		slog.Int("members", len(ens.Members)), slog.Int("candidates", len(st.Candidates)-1), slog.Float64("loss", won.Loss),
		slog.Float64("diff", won.Diff), slog.Any("shifts", st.Shifts(len(c.cfg.Sites))), slog.Float64("spread", ens.Spread))
	if sel.BySite {
		own := make([][]int, len(c.cfg.Sites))
		for s := range own {
			own[s] = ens.SiteMembers(s)
		}
		c.log.Info("each site's own members", slog.String(wire.LogKeyRun, c.st.RunID), slog.Any("members", own))
	}
	return nil
}

// finalEnvelopes are every site's final weights at the current step, with
// the tensors extra.
func (c *coordinator) finalEnvelopes(extra ...wire.Tensor) ([]*wire.Envelope, error) {
	out := make([]*wire.Envelope, len(c.cfg.Sites))
	for s := range c.cfg.Sites {
		e, err := c.finalWeightsFor(s, extra...)
		if err != nil {
			return nil, err
		}
		out[s] = e
	}
	return out, nil
}

// lossTensors are what the final weights of stage 2 add: the candidates
// and their estimators, whose held-out losses the sites answer.
func (st *SelectState) lossTensors() []wire.Tensor {
	ts := candidateTensors(st.Candidates)
	for i, est := range st.Estimators {
		ts = append(ts, estimatorTensors(fmt.Sprintf("%s%d.", pCand, i), est)...)
	}
	return append(ts, wire.Scalar(tSelectStage, 2))
}

// choiceTensors are what the final weights of the ATE step add when the run
// selected a model: the chosen estimator and every candidate's scores, for
// the site to publish.
func (st *SelectState) choiceTensors(site int) ([]wire.Tensor, error) {
	n := len(st.Candidates)
	loss, se, diff, diffSE := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i, cand := range st.Candidates {
		loss[i], se[i], diff[i], diffSE[i] = cand.Loss, cand.SE, cand.Diff, cand.DiffSE
	}
	ts := append(candidateTensors(st.Candidates), wire.Scalar(tSelectStage, 3), wire.Scalar(tSelectChosen, float64(st.Chosen)),
		wire.Vector(tSelectLoss, loss), wire.Vector(tSelectSE, se), wire.Vector(tSelectDiff, diff), wire.Vector(tSelectDiffSE, diffSE), wire.Scalar(tSelectN, float64(st.Held)))
	est := st.Estimators[st.Chosen]
	if est.Kind != selection.KindEnsemble {
		return append(ts, estimatorTensors(pChosen, est)...), nil
	}
	// The site's members: its own choice (Selection.BySite), or the
	// federation's, whose estimators are sent in the same order.
	est, err := est.AtSite(st.Ensemble, site)
	if err != nil {
		return nil, err
	}
	var members []float64
	for _, m := range est.Members {
		members = append(members, float64(m.Candidate))
	}
	ts = append(ts, wire.Vector(tSelectMember, members), wire.Scalar(tSelectShift, st.Shift(site)))
	if site < len(st.Ensemble.Sites) && st.Ensemble.Sites[site].Diff != nil {
		c := st.Ensemble.Sites[site]
		ts = append(ts, wire.Scalar(tSelectSiteBest, float64(c.Best)), wire.Vector(tSelectSiteDiff, c.Diff), wire.Vector(tSelectSiteDiffSE, c.DiffSE))
	}
	for j, m := range est.Members {
		ts = append(ts, estimatorTensors(fmt.Sprintf("%s%d.", pChosen, j), m.Estimator)...)
	}
	return ts, nil
}

// stats answers stage 1: the ridge statistics of the site's training rows
// on the reference model's outcome features.
func (s *site) stats(ctx context.Context, e *wire.Envelope, model *estimator.Model) ([]*wire.Envelope, error) {
	dr, err := scalar(e, tSelectDR)
	if err != nil {
		return nil, err
	}
	var ts []wire.Tensor
	if s.noisySelection() {
		ts, err = s.noisedOnce(e, 1, func() ([]wire.Tensor, error) { return s.privateStats(ctx, model, dr != 0) })
	} else {
		var st selection.Stats
		var psi []float64
		if dr != 0 {
			if psi, err = s.trainingPseudoOutcomes(ctx); err != nil {
				return nil, err
			}
		}
		if st, err = selection.SiteStatsRows(ctx, model, s.res.Index, s.kept, s.trainPos, psi); err == nil {
			s.own, ts = &st, statsTensors(st)
		}
	}
	if err != nil {
		return nil, err
	}
	out, err := s.reply(e, wire.KindStats, ts)
	if err != nil {
		return nil, err
	}
	return []*wire.Envelope{out}, nil
}

// losses answers stage 2: each candidate's loss sums over the site's
// held-out rows.
func (s *site) losses(ctx context.Context, e *wire.Envelope) ([]*wire.Envelope, error) {
	cands, err := decodeCandidates(e, s.res.Kernels, s.cfg.Limits.orDefault().Candidates)
	if err != nil {
		return nil, err
	}
	ests := make([]selection.Estimator, len(cands))
	models := make([]*estimator.Model, len(cands))
	for i, cand := range cands {
		if ests[i], err = decodeEstimator(e, fmt.Sprintf("%s%d.", pCand, i), cand.Kind, cand.Ridge); err != nil {
			return nil, err
		}
		models[i] = s.res.Models[cand.Kernel]
	}
	if ests, err = s.localise(ctx, ests...); err != nil {
		return nil, err
	}
	sums := selection.SiteSums{Pairs: selection.NewPairs(len(ests)), Centre: selection.Centre{CATE: make([]float64, len(ests))}}
	if len(s.res.Held) > 0 && s.noisySelection() {
		ts, err := s.noisedOnce(e, 2, func() ([]wire.Tensor, error) {
			sums, err := s.privateLosses(ctx, ests, models)
			if err != nil {
				return nil, err
			}
			return append(siteSumsTensors(sums), lossNoiseTensor(sums)), nil
		})
		if err != nil {
			return nil, err
		}
		out, err := s.reply(e, wire.KindLosses, ts)
		if err != nil {
			return nil, err
		}
		return []*wire.Envelope{out}, nil
	}
	if len(s.res.Held) > 0 {
		nu, err := s.nuisance(ctx)
		if err != nil {
			return nil, fmt.Errorf("validation pseudo-outcomes: %w", err)
		}
		if sums, err = selection.SiteLosses(ctx, nu, s.res.Index, s.kept, s.res.Held, ests, models, 0, selection.Known{}); err != nil {
			return nil, err
		}
		s.pairs = &sums.Pairs
	}
	out, err := s.reply(e, wire.KindLosses, siteSumsTensors(sums))
	if err != nil {
		return nil, err
	}
	return []*wire.Envelope{out}, nil
}

// choice reads the choice that stage 3 carries.
func (s *site) choice(e *wire.Envelope) (*SiteSelection, error) {
	cands, err := decodeCandidates(e, s.res.Kernels, s.cfg.Limits.orDefault().Candidates)
	if err != nil {
		return nil, err
	}
	n := len(cands)
	chosen, err := integer(e, tSelectChosen)
	if err != nil {
		return nil, err
	}
	if chosen >= n {
		return nil, fmt.Errorf("%w: chosen candidate %d of %d", ErrProtocol, chosen, n)
	}
	var cols [4][]float64
	for i, name := range []string{tSelectLoss, tSelectSE, tSelectDiff, tSelectDiffSE} {
		if cols[i], err = vector(e, name, n); err != nil {
			return nil, err
		}
	}
	for i := range cands {
		cands[i].Score = selection.Score{Loss: cols[0][i], SE: cols[1][i], Diff: cols[2][i], DiffSE: cols[3][i], Chosen: i == chosen}
	}
	var est selection.Estimator
	switch {
	case cands[chosen].Kind == selection.KindEnsemble:
		est, err = decodeEnsemble(e, cands)
	case cands[chosen].Kernel != 0:
		// Only an ensemble's members name their kernels (selection.Estimator).
		return nil, fmt.Errorf("%w: chosen candidate %s of kernel %d is not an ensemble", ErrProtocol, cands[chosen].Name, cands[chosen].Kernel)
	default:
		est, err = decodeEstimator(e, pChosen, cands[chosen].Kind, cands[chosen].Ridge)
	}
	if err != nil {
		return nil, err
	}
	all, err := integer(e, tSelectN)
	if err != nil {
		return nil, err
	}
	out := &SiteSelection{Candidates: cands, Chosen: chosen, Estimator: est, HeldAll: all}
	if _, ok := e.Tensor(tSelectSiteBest); ok && est.Kind == selection.KindEnsemble {
		if out.Site, err = s.siteScores(e, n-1); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// siteScores reads the site's scores under a choice per site, of c
// candidates, and adds its own differences from its validation rows'
// Pairs (kept by losses; none at a site that noises its selection).
func (s *site) siteScores(e *wire.Envelope, c int) (*selection.SiteScores, error) {
	best, err := integer(e, tSelectSiteBest)
	if err != nil {
		return nil, err
	}
	if best >= c {
		return nil, fmt.Errorf("%w: the site's best candidate %d of %d", ErrProtocol, best, c)
	}
	out := &selection.SiteScores{Best: best}
	if out.Diff, err = vector(e, tSelectSiteDiff, c); err != nil {
		return nil, err
	}
	if out.DiffSE, err = vector(e, tSelectSiteDiffSE, c); err != nil {
		return nil, err
	}
	for a := range c {
		if math.IsNaN(out.Diff[a]) || math.IsInf(out.Diff[a], 0) || !(out.DiffSE[a] >= 0) || math.IsInf(out.DiffSE[a], 0) {
			return nil, fmt.Errorf("%w: candidate %d's difference at the site %v ± %v", ErrProtocol, a, out.Diff[a], out.DiffSE[a])
		}
	}
	if s.pairs != nil && s.pairs.C == c && s.pairs.N >= 2 {
		if out.Own, out.OwnSE, err = selection.OwnDiffs(*s.pairs, best); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// localise returns ests with their site-local candidates solved from the
// site's own training rows' statistics (selection.Estimator.Localise),
// computed once per run. A site that noises its selection refuses them:
// the coordinator offers none to a run with private sites.
func (s *site) localise(ctx context.Context, ests ...selection.Estimator) ([]selection.Estimator, error) {
	var local, dr bool
	for _, e := range ests {
		for _, m := range append([]selection.Member{{Estimator: e}}, e.Members...) {
			local = local || selection.Local(m.Kind)
			dr = dr || m.Kind == selection.KindSiteDR
		}
	}
	if !local {
		return ests, nil
	}
	if s.noisySelection() {
		return nil, fmt.Errorf("%w: site-local candidates at a site that noises its model selection", ErrProtocol)
	}
	if s.own == nil || (dr && s.own.DR == nil) {
		var psi []float64
		if dr {
			var err error
			if psi, err = s.trainingPseudoOutcomes(ctx); err != nil {
				return nil, fmt.Errorf("site-local candidates: %w", err)
			}
		}
		st, err := selection.SiteStatsRows(ctx, s.res.Model, s.res.Index, s.kept, s.trainPos, psi)
		if err != nil {
			return nil, fmt.Errorf("site-local candidates: %w", err)
		}
		s.own = &st
	}
	return selection.Localised(ests, *s.own)
}

// trainingPseudoOutcomes returns the doubly robust pseudo-outcomes of the
// site's training rows (trainPos), which train the DR-learner: from the
// nuisances of its kept rows cross-fitted with no model trained on a
// held-out row (estimator.CrossFitExcept), which the held-out losses and
// the AIPW reuse (nuisance); at a site whose nuisances are private, from
// exact ones of their own, as an exact selection's statistics are.
func (s *site) trainingPseudoOutcomes(ctx context.Context) ([]float64, error) {
	var nu inference.Nuisance
	var err error
	if s.privateNuisance() {
		nu, err = estimator.CrossFitExcept(ctx, s.res.Setup, s.res.Index, s.kept, s.res.Held)
	} else {
		nu, err = s.nuisance(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("training pseudo-outcomes: %w", err)
	}
	return selection.PseudoOutcomes(s.kept, nu, s.trainPos)
}
