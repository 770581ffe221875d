package federation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/selection"
)

// hello answers the coordinator's hello with the site's fingerprints and
// moments, and its identity hashes.
//
// A hello that names the rows the site had when the run began (tSiteRows)
// answers this process's request to rejoin a run under way. The run's
// de-duplication verdict and pooled standardisation were computed from
// those rows, so a site that now has another count stops before it sends
// anything computed from its rows. One that has as many answers nothing:
// the coordinator holds the handshake's moments and hashes and has no use
// for new ones, which, taken over rows edited since, would tell it the
// edit.
//
// Before it answers, the site refuses the run when its table has too few
// rows in an arm, and SiteConfig.Join may refuse it.
func (s *site) hello(ctx context.Context, e *wire.Envelope) ([]*wire.Envelope, error) {
	if s.tooFew != nil {
		return nil, s.tooFew
	}
	_, rejoin := e.Tensor(tSiteRows)
	if rejoin {
		began, err := integer(e, tSiteRows)
		if err != nil {
			return nil, err
		}
		if n := s.cfg.Data.Rows(); n != began {
			return nil, fmt.Errorf("%w: site %s's table holds %d rows, the run began with %d", ErrRowsChanged, s.cfg.Name, n, began)
		}
	}
	if s.cfg.Join != nil {
		if err := s.cfg.Join(ctx, e.RunID); err != nil {
			return nil, err
		}
	}
	cfg, err := decodeConfig(e)
	if err != nil {
		return nil, err
	}
	idx, err := integer(e, tSiteIndex)
	if err != nil {
		return nil, err
	}
	m, err := integer(e, tSiteCount)
	if err != nil {
		return nil, err
	}
	if idx >= m {
		return nil, fmt.Errorf("%w: site index %d of %d", ErrProtocol, idx, m)
	}
	// The count sizes the list of peers, and every model's row of Λ.
	if most := s.cfg.Limits.orDefault().Sites; m > most {
		return nil, overLimit("site count", m, most, "sites")
	}
	s.peers = make([]string, m)
	for _, t := range e.Tensors() {
		name, ok := strings.CutPrefix(t.Name, tPeerPrefix)
		if !ok {
			continue
		}
		v, err := t.Scalar()
		if err != nil || v < 0 || v >= float64(m) || v != math.Trunc(v) || wire.CheckName(name) != nil {
			return nil, fmt.Errorf("%w: hello names peer %q at index %v of %d", ErrProtocol, name, v, m)
		}
		s.peers[int(v)] = name
	}
	// A coordinator that predates model selection sends no share.
	s.share = 0
	if _, ok := e.Tensor(tSelectShare); ok {
		if s.share, err = scalar(e, tSelectShare); err != nil {
			return nil, err
		}
		if err := (Selection{Share: s.share}).check(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrProtocol, err)
		}
	}
	if err := s.cfg.Limits.check(cfg, s.cfg.Data.Rows()); err != nil {
		return nil, err
	}
	run, extra, err := decodeKernels(e, s.cfg.Limits.orDefault().Kernels)
	if err != nil {
		return nil, err
	}
	spectra, names, err := s.openKernels(ctx, run, extra)
	if err != nil {
		return nil, err
	}
	// A rejoining process is charged again: its round count starts over.
	// Charged once the kernels are open, so that a run refused for them
	// spends nothing, and for every kernel's training (privacy.go).
	if err := s.chargePrivacy(ctx, e.RunID, cfg, extra); err != nil {
		return nil, err
	}
	// The rows held out for model selection are drawn before anything is
	// computed from the site's rows, so that the moments, and with them
	// the pooled standardisation, see training rows only.
	s.heldAll = nil
	if s.share > 0 {
		if s.heldAll, err = s.drawHoldout(cfg.Seed); err != nil {
			return nil, err
		}
	}
	mo, err := s.helloMoments()
	if err != nil {
		return nil, err
	}
	placeholder, err := estimator.NewScaler(s.cfg.Schema, []estimator.Moments{mo})
	if err != nil {
		return nil, err
	}
	setups, err := setupsFor(ctx, s.cfg.Schema, spectra, cfg, nil, placeholder)
	if err != nil {
		return nil, fmt.Errorf("configuration from the coordinator: %w", err)
	}
	s.spectra, s.fps, s.cfgE = spectra, digests(setups), cfg
	s.res = &SiteResult{RunID: e.RunID, Index: idx, Sites: m, Lambda: map[estimator.Kind][]float64{}, Rounds: map[estimator.Kind]int{}, Peers: s.peers,
		Kernels: names}
	if rejoin {
		s.log.Info("rejoining run; its row count is the one it began with", slog.String(wire.LogKeyRun, e.RunID))
		return nil, nil
	}
	bin := make([]float64, len(s.cfg.Schema.Binary))
	for j, b := range s.cfg.Schema.Binary {
		bin[j] = b2f(b)
	}
	hello, err := s.reply(e, wire.KindHello, append([]wire.Tensor{
		wire.Vector(tSchemaBinary, bin), wire.Scalar(tSchemaBinOut, b2f(s.cfg.Schema.BinaryOutcome)),
		wire.Scalar(tHelloRows, float64(s.cfg.Data.Rows())),
		wire.Scalar(tMomentsN, float64(mo.N)), wire.Vector(tMomentsSum, mo.Sum), wire.Vector(tMomentsSumSq, mo.SumSq),
		wire.Vector(tMomentsLog, logMoments(mo)), wire.Scalar(tSelectShare, s.share),
		wire.Scalar(tPrivate, b2f(s.cfg.Privacy != nil)),
	}, s.balanceTensors(ctx)...), columnDigests(s.cfg.ColumnKey, s.cfg.Columns, s.cfg.Schema), wire.DigestList{Name: dOmega0, Digests: s.fps})
	if err != nil {
		return nil, err
	}
	var dd *wire.Envelope
	if s.cfg.Identities == nil {
		s.log.Info("no identity columns configured: rows are not de-duplicated")
		dd, err = s.reply(e, wire.KindDedupHashes, []wire.Tensor{wire.Scalar(tDedupOn, 0)})
	} else {
		dd, err = s.reply(e, wire.KindDedupHashes, []wire.Tensor{wire.Scalar(tDedupOn, 1)},
			wire.DigestList{Name: dDedup, Digests: s.cfg.Identities})
	}
	if err != nil {
		return nil, err
	}
	return []*wire.Envelope{hello, dd}, nil
}

// logMoments is the moments.log tensor of mo: the rows with y > 0, Σ log y
// and Σ (log y)² when every row's outcome is positive, zeros otherwise.
// Those sums run over the positive rows alone, which min_arm_rows does not
// bound: at a site where one or two outcomes are positive (a cost or a
// length of stay that is mostly zero), they would give those outcomes
// exactly. The pooled log transform needs every row of every site positive
// (estimator.Scaler.LogYValid), and zeros are what tells the coordinator
// that this site's are not, so the scaler is the one the full sums give.
func logMoments(mo estimator.Moments) []float64 {
	if mo.Positive != mo.N {
		return []float64{0, 0, 0}
	}
	return []float64{float64(mo.Positive), mo.LogSum, mo.LogSumSq}
}

// verdict applies the de-duplication verdict and the pooled scaler.
//
// The rows it keeps are the rows every gradient of the run sums over, so
// they are fixed for the run: a later verdict (a rejoin sends the run's
// verdict again) must keep the same rows. Were the coordinator able to
// change them, it could ask for gradients at the same weights over two
// row sets that differ by one row and read that row's term from the
// difference. A site that sent no identity hashes has no duplicates for a
// verdict to name, so one that leaves out any of its rows is refused too.
func (s *site) verdict(ctx context.Context, e *wire.Envelope) error {
	if s.res == nil {
		return fmt.Errorf("%w: dedup-verdict before hello", ErrProtocol)
	}
	scaler, err := decodeScaler(e, len(s.cfg.Schema.Binary))
	if err != nil {
		return err
	}
	drop, err := vector(e, tDedupDrop, -1)
	if err != nil {
		return err
	}
	n := s.cfg.Data.Rows()
	if s.cfg.Identities == nil && len(drop) > 0 {
		return fmt.Errorf("%w: dedup-verdict of run %s leaves out %d rows of site %s, which sent no identity hashes",
			ErrProtocol, e.RunID, len(drop), s.cfg.Name)
	}
	if len(drop) > n {
		return fmt.Errorf("%w: dedup-verdict of run %s leaves out %d rows of site %s, which has %d",
			ErrProtocol, e.RunID, len(drop), s.cfg.Name, n)
	}
	dropped := make([]bool, n)
	for _, v := range drop {
		if v < 0 || v >= float64(n) || v != math.Trunc(v) {
			return fmt.Errorf("%w: dedup-verdict names row position %v of %d", ErrProtocol, v, n)
		}
		dropped[int(v)] = true
	}
	kept := make([]int, 0, n)
	for i := range n {
		if !dropped[i] {
			kept = append(kept, i)
		}
	}
	// s.kept is set once a verdict of this run has been applied.
	if s.kept != nil && !slices.Equal(kept, s.res.Kept) {
		return fmt.Errorf("%w: another dedup-verdict of run %s keeps other rows of site %s than the run's first (%d rows, not the %d it trains on)",
			ErrProtocol, e.RunID, s.cfg.Name, len(kept), len(s.res.Kept))
	}
	if len(kept) == 0 {
		return errors.New("federation: every row was dropped as a duplicate")
	}
	s.res.Kept = kept
	s.kept = subset(s.cfg.Data, s.res.Kept)
	if err := s.cfg.checkArms(s.kept, "after de-duplication"); err != nil {
		return err
	}
	setups, err := setupsFor(ctx, s.cfg.Schema, s.spectra, s.cfgE, nil, scaler)
	if err != nil {
		return err
	}
	if !slices.Equal(digests(setups), s.fps) {
		return fmt.Errorf("%w: a kernel plugin is not deterministic", ErrFrequencies)
	}
	s.setups, s.trainKernel = setups, 0
	setup := setups[0]
	s.res.Setup = setup
	s.trainPos, s.res.Held = nil, nil
	if s.share > 0 {
		if s.trainPos, s.res.Held, err = s.holdout(); err != nil {
			return err
		}
	}
	s.train, err = estimator.NewSiteRows(s.res.Index, s.kept, s.trainPos, setup)
	if err != nil {
		return err
	}
	if err := s.privatize(); err != nil {
		return err
	}
	s.log.Info("de-duplication applied", slog.Int("rows_kept", len(s.res.Kept)), slog.Int("rows_dropped", n-len(s.res.Kept)))
	return nil
}

// drawHoldout returns the positions, among all the site's rows, of the
// rows held out for model selection (selection.SiteHoldout, keyed by the
// model seed, or at a private site selection.KeyedHoldout, keyed by each
// row; SiteConfig.MinArmRows bounds either), nil when the site is too
// small to hold any out within the bound. They are drawn at hello, before
// de-duplication, so that the moments the hello sends leave them out.
func (s *site) drawHoldout(seed uint64) ([]int, error) {
	if s.cfg.Privacy != nil {
		return s.keyedHoldout() // privacy_selection.go
	}
	return selection.SiteHoldout(s.cfg.Data.W, s.share, seed, s.cfg.minArmRows())
}

// holdout splits the kept rows into the rows the models train on and the
// rows held out for model selection: those of the hello's draw
// (drawHoldout) that de-duplication kept, by their positions among the
// kept rows. A site too small to hold rows out within the bound, before or
// after de-duplication, trains on all its kept rows (nil positions) and
// adds nothing to the validation losses; it says so in its log.
func (s *site) holdout() (train, held []int, err error) {
	held = keptHeld(s.res.Kept, s.heldAll)
	if held != nil && !enoughHeld(s.kept.W, held, s.cfg.minArmRows()) {
		held = nil
	}
	if held == nil {
		s.log.Warn("too few rows to hold any out for model selection: training on all of them; the other sites' held-out rows choose the estimator",
			slog.Float64("validation_share", s.share), slog.Int("min_arm_rows", s.cfg.minArmRows()))
		return nil, nil, nil
	}
	if train, err = selection.TrainingRows(s.kept.Rows(), held); err != nil {
		return nil, nil, err
	}
	return train, held, nil
}

// keptHeld returns the positions among the kept rows (kept: increasing
// positions among all rows) of the held rows (increasing positions among
// all rows) that were kept; nil when held is.
func keptHeld(kept, held []int) []int {
	if held == nil {
		return nil
	}
	out := []int{}
	j := 0
	for k, i := range kept {
		for j < len(held) && held[j] < i {
			j++
		}
		if j < len(held) && held[j] == i {
			out = append(out, k)
		}
	}
	return out
}

// enoughHeld reports whether the rows held at positions held of arms w
// still make a holdout after de-duplication: at least 2·minArm held (and
// two), as SiteHoldout draws them, and minArm training rows in each arm.
func enoughHeld(w []float64, held []int, minArm int) bool {
	if len(held) < max(2, 2*minArm) || len(held) > len(w)-2 {
		return false
	}
	var arms [2]int
	for _, x := range w {
		arms[int(x)]++
	}
	for _, i := range held {
		arms[int(w[i])]--
	}
	return arms[0] >= minArm && arms[1] >= minArm
}

// subset returns the rows at positions keep of d.
func subset(d *estimator.Data, keep []int) *estimator.Data {
	if len(keep) == d.Rows() {
		return d
	}
	return d.Subset(keep)
}
