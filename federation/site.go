package federation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
)

// SiteRows are the rows a site takes part in a run with, as
// SiteConfig.Rows returns them.
type SiteRows struct {
	Data       *estimator.Data
	Schema     estimator.Schema
	Columns    []string
	Identities []wire.Digest
}

// check returns an error unless r holds rows, with one identity hash per
// row when it has any.
func (r SiteRows) check() error {
	if r.Data == nil || r.Data.Rows() == 0 {
		return errors.New("federation: site has no rows")
	}
	if r.Identities != nil && len(r.Identities) != r.Data.Rows() {
		return fmt.Errorf("federation: %d identity hashes for %d rows", len(r.Identities), r.Data.Rows())
	}
	return nil
}

// Direction says whether an audited envelope was sent or received.
type Direction int

const (
	// Sent marks an envelope the site sent.
	Sent Direction = iota
	// Received marks an envelope the site received (admitted or dropped).
	Received
)

// SiteConfig configures a site.
type SiteConfig struct {
	Name        string // the site's federation name
	Coordinator string // the coordinator's federation name

	Data    *estimator.Data  // the site's rows
	Schema  estimator.Schema // their schema
	Columns []string         // covariate names, in Schema order (fingerprinted, never sent)
	// Identities are the HMACs of the rows' identity columns (IdentityHMAC),
	// one per row; nil when the site has no identity columns.
	Identities []wire.Digest

	Spectral estimator.Spectral // the kernel plugin

	// MinArmRows is the fewest rows each treatment arm must have, before
	// and after de-duplication, for the site to send anything computed
	// from its rows. The outcome model's gradient for an arm sums over
	// that arm's rows only, so an arm of one row would put that row's
	// features on the wire. Zero means DefaultMinArmRows; a negative
	// value turns the guard off (tests only).
	MinArmRows int

	// Rows, when set, is called when the site is sent the hello of a run
	// it does not know yet (a new run, or one it rejoins after a restart),
	// before anything else, and its rows replace Data, Schema, Columns and
	// Identities for that run. A long-lived site thus trains each run on
	// its table as it is when the run begins, not as it was when the
	// previous run ended, and Join and the rejoin check judge the rows the
	// run will use. An error stops the site, which sends nothing for the
	// run.
	Rows func(ctx context.Context) (SiteRows, error)

	// Join, when set, is called with the run's id when the site is sent a
	// run's hello, before it answers anything computed from its rows; an
	// error stops the site, which sends nothing computed from its rows for
	// the run, and RunSite returns the error as it is. An error that wraps
	// ErrTooFewChanged refuses the run: the site first tells the
	// coordinator so (a done with the reason code alone), and the run
	// stops at once. Any other error is a failure: the site sends nothing,
	// since a restarted site may still answer the step. MinArmRows bounds
	// what one message says about few rows; Join lets the caller bound what
	// the difference of two runs' messages says, which only it can, since
	// it keeps the rows of the site's earlier runs (crffd site:
	// store.Site.JoinRun).
	Join func(ctx context.Context, run string) error

	// Audit, when set, is called for every envelope sent or received; an
	// error stops the run, so that nothing leaves the site unaudited.
	Audit func(ctx context.Context, d Direction, e *wire.Envelope) error
	// Loss, when set, is called with the loss J^(s) the site computed on
	// its own rows for model kind at a round, each time it computes one.
	Loss func(kind estimator.Kind, round int, loss float64)
	// Publish, when set, is called with the results before the site
	// confirms the run with done.
	Publish func(ctx context.Context, r *SiteResult) error

	Logger  *slog.Logger // nil discards
	Metrics *Metrics     // nil counts nothing
}

// SiteATE is an average treatment effect with its standard error and the
// rows it averages over.
type SiteATE struct {
	ATE, SE float64
	N       int
}

// SiteResult is what a site holds after a run.
type SiteResult struct {
	RunID        string
	Index, Sites int
	Setup        *estimator.Setup
	Model        *estimator.Model   // the site's own model (estimator.NewSiteModel)
	Kept         []int              // positions of the rows trained on (not dropped as duplicates)
	Effects      *estimator.Effects // every row's effects, in Data order
	Local        SiteATE            // over the kept rows
	Global       SiteATE
	Lambda       map[estimator.Kind][]float64 // the site's row of each model's Λ
	Peers        []string                     // every site's name, by index (Lambda's columns)
	Rounds       map[estimator.Kind]int
}

// DefaultMinArmRows is SiteConfig.MinArmRows when it is zero. Five is the
// smallest cell count that common statistical disclosure rules publish.
const DefaultMinArmRows = 5

// checkArms refuses rows with fewer than the configured minimum in either
// treatment arm. stage says which rows: before or after de-duplication.
func (c *SiteConfig) checkArms(d *estimator.Data, stage string) error {
	least := c.MinArmRows
	if least == 0 {
		least = DefaultMinArmRows
	}
	var treated int
	for _, w := range d.W {
		if w == 1 {
			treated++
		}
	}
	control := d.Rows() - treated
	if treated < least || control < least {
		return fmt.Errorf("%w: site %s has %d treated and %d control rows %s; each arm needs at least %d",
			ErrTooFewRows, c.Name, treated, control, stage, least)
	}
	return nil
}

// site is the state of a site over one run.
type site struct {
	cfg     SiteConfig
	conn    Conn
	log     *slog.Logger
	tracker *wire.Tracker
	replies map[uint64][]*wire.Envelope // answers of the current step, for duplicates

	res   *SiteResult
	kept  *estimator.Data
	train *estimator.Site
	fp    wire.Digest
	cfgE  estimator.Config
	peers []string // every site's name by index, from hello ("" when not sent)
	// instance is the value of the rejoin scalar this process sends: a
	// random integer in [1, 2^52], exact in a float64, drawn once per
	// RunSite. The coordinator drops an envelope equal to one it admitted
	// in the same step, so a process restarted twice within a step must
	// not repeat its predecessor's request word for word; this process's
	// own request, sent again in answer to the same envelope, is still a
	// duplicate. It is no record's data.
	instance float64
	// tooFew is the ErrTooFewRows of a table with too few rows in an arm,
	// nil otherwise: the site refuses the first run whose hello it is sent.
	tooFew error
}

// RunSite takes part in one federation run over conn: it waits for the
// coordinator's hello of a run, answers every step, publishes the results
// and returns them once it has confirmed the run with done.
//
// A site that refuses the run (ErrTooFewRows, ErrRowsChanged, or a Join
// error wrapping ErrTooFewChanged) sends the coordinator a done saying so
// and why, and returns its error. A table with too few rows in an arm is
// refused in answer to the first hello, so that the coordinator hears of
// it rather than waiting out its retries.
func RunSite(ctx context.Context, cfg SiteConfig, conn Conn) (*SiteResult, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &site{cfg: cfg, conn: conn, log: log, instance: float64(rand.Uint64N(1<<52) + 1)}
	if err := s.useRows(SiteRows{cfg.Data, cfg.Schema, cfg.Columns, cfg.Identities}); err != nil {
		return nil, err
	}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, ok := <-conn.Inbox():
			if !ok {
				return nil, errors.New("federation: transport closed")
			}
			done, err := s.handle(ctx, e)
			if err != nil || done {
				return s.res, err
			}
		}
	}
}

// refreshRows takes the rows SiteConfig.Rows returns for the run now
// beginning.
func (s *site) refreshRows(ctx context.Context) error {
	if s.cfg.Rows == nil {
		return nil
	}
	r, err := s.cfg.Rows(ctx)
	if err == nil {
		err = s.useRows(r)
	}
	if err != nil {
		return fmt.Errorf("read the rows of site %s for the run: %w", s.cfg.Name, err)
	}
	return nil
}

// useRows makes r the site's rows, once they pass check. A table with too
// few rows in an arm is not an error here: the site refuses the next run
// whose hello it is sent (s.tooFew), so that the coordinator hears why.
func (s *site) useRows(r SiteRows) error {
	if err := r.check(); err != nil {
		return err
	}
	s.cfg.Data, s.cfg.Schema, s.cfg.Columns, s.cfg.Identities = r.Data, r.Schema, r.Columns, r.Identities
	if s.tooFew = s.cfg.checkArms(r.Data, "in its table"); s.tooFew != nil {
		s.log.Error("the site will refuse the coordinator's run", slog.String(LogKeyReason, s.tooFew.Error()))
	}
	return nil
}

func (s *site) drop(e *wire.Envelope, reason string) {
	s.cfg.Metrics.dropped()
	s.log.Warn("envelope dropped", slog.Any("envelope", e), slog.String(LogKeyReason, reason))
}

// handle processes one envelope; done reports the end of the run.
func (s *site) handle(ctx context.Context, e *wire.Envelope) (done bool, err error) {
	s.cfg.Metrics.received(e)
	if s.cfg.Audit != nil {
		if err := s.cfg.Audit(ctx, Received, e); err != nil {
			return false, fmt.Errorf("audit: %w", err)
		}
	}
	if e.Sender != s.cfg.Coordinator || e.Recipient != s.cfg.Name {
		s.drop(e, "not from the coordinator to this site")
		return false, nil
	}
	if e.Kind == wire.KindHello && (s.tracker == nil || e.RunID != s.runID()) {
		s.tracker = wire.NewTracker(e.RunID, e.Round)
		s.replies = map[uint64][]*wire.Envelope{}
		s.res, s.kept, s.train = nil, nil, nil
		s.log.Info("joining run", slog.String(wire.LogKeyRun, e.RunID))
		if err := s.refreshRows(ctx); err != nil {
			return false, err
		}
	}
	if s.tracker == nil || e.RunID != s.runID() {
		// A site restarted mid-run knows nothing of the run: ask to rejoin.
		s.drop(e, "unknown run: asking the coordinator to rejoin")
		r, err := s.reply(e, wire.KindHello, []wire.Tensor{wire.Scalar(tRejoin, s.instance)})
		if err != nil {
			return false, err
		}
		return false, s.send(ctx, r)
	}
	v, aerr := s.tracker.Admit(e)
	if v == wire.Future {
		if err := s.tracker.Advance(e.Round); err != nil {
			return false, err
		}
		v, aerr = s.tracker.Admit(e)
	}
	switch v {
	case wire.Current:
	case wire.Duplicate:
		s.drop(e, aerr.Error())
		for _, r := range s.replies[e.Round] {
			if err := s.send(ctx, r); err != nil {
				return false, err
			}
		}
		return false, nil
	default:
		s.drop(e, aerr.Error())
		return false, nil
	}
	if e.Round > 0 {
		for r := range s.replies {
			if r < e.Round {
				delete(s.replies, r)
			}
		}
	}
	var out []*wire.Envelope
	switch {
	case e.Kind == wire.KindHello:
		out, err = s.hello(ctx, e)
	case e.Kind == wire.KindDedupVerdict:
		err = s.verdict(ctx, e)
	case e.Kind == wire.KindWeights && e.Model != "":
		out, err = s.compute(ctx, e)
	case e.Kind == wire.KindWeights:
		out, err = s.score(ctx, e)
	case e.Kind == wire.KindGlobalATE:
		out, err = s.global(ctx, e)
		done = err == nil
	case e.Kind == wire.KindDone:
		return true, s.refused(e)
	default:
		s.drop(e, fmt.Sprintf("unexpected kind %s", e.Kind))
		return false, nil
	}
	if err != nil {
		s.refuse(ctx, e, err)
		return false, err
	}
	s.replies[e.Round] = out
	for _, r := range out {
		if err := s.send(ctx, r); err != nil {
			return false, err
		}
	}
	if done {
		s.log.Info("run complete", slog.String(wire.LogKeyRun, s.runID()))
	}
	return done, nil
}

// refuse tells the coordinator, in answer to e, that the site refuses the
// run when err is a refusal (refusalOf), so that the run stops at once
// rather than when the coordinator's retries run out. The done carries the
// status and the reason code alone: no count, since the coordinator has the
// site's row count already and the arms' would describe its rows. It is
// audited like every envelope sent. A refusal that cannot be sent is
// logged, and the site's error stands: the coordinator then stops as it
// did before refusals were sent, with ErrSilent.
func (s *site) refuse(ctx context.Context, e *wire.Envelope, err error) {
	why := refusalOf(err)
	if why == refusalUnknown {
		return
	}
	d, err := s.reply(e, wire.KindDone, []wire.Tensor{wire.Scalar(tStatus, -1), wire.Scalar(tRefusalReason, float64(why))})
	if err == nil {
		err = s.send(ctx, d)
	}
	if err != nil {
		s.log.Warn("refusal not sent to the coordinator", slog.String(wire.LogKeyRun, e.RunID), slog.String(LogKeyReason, err.Error()))
		return
	}
	s.log.Info("run refused", slog.String(wire.LogKeyRun, e.RunID), slog.String(LogKeyReason, why.String()))
}

func (s *site) runID() string {
	id, _ := s.tracker.Position()
	return id
}

func (s *site) send(ctx context.Context, e *wire.Envelope) error {
	if s.cfg.Audit != nil {
		if err := s.cfg.Audit(ctx, Sent, e); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
	}
	if err := s.conn.Send(ctx, e); err != nil {
		return fmt.Errorf("send %s: %w", e.Kind, err)
	}
	s.cfg.Metrics.sent(e)
	return nil
}

func (s *site) reply(in *wire.Envelope, kind wire.Kind, ts []wire.Tensor, lists ...wire.DigestList) (*wire.Envelope, error) {
	return wire.New(wire.Header{RunID: in.RunID, Model: in.Model, Round: in.Round, Kind: kind, Sender: s.cfg.Name, Recipient: in.Sender}, ts, lists...)
}

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
	mo := s.cfg.Data.Moments()
	placeholder, err := estimator.NewScaler(s.cfg.Schema, []estimator.Moments{mo})
	if err != nil {
		return nil, err
	}
	setup, err := estimator.NewSetup(ctx, s.cfg.Schema, s.cfg.Spectral, cfg, placeholder)
	if err != nil {
		return nil, fmt.Errorf("configuration from the coordinator: %w", err)
	}
	s.fp, s.cfgE = frequencyDigest(setup), cfg
	s.res = &SiteResult{RunID: e.RunID, Index: idx, Sites: m, Lambda: map[estimator.Kind][]float64{}, Rounds: map[estimator.Kind]int{}, Peers: s.peers}
	if rejoin {
		s.log.Info("rejoining run; its row count is the one it began with", slog.String(wire.LogKeyRun, e.RunID))
		return nil, nil
	}
	bin := make([]float64, len(s.cfg.Schema.Binary))
	for j, b := range s.cfg.Schema.Binary {
		bin[j] = b2f(b)
	}
	hello, err := s.reply(e, wire.KindHello, []wire.Tensor{
		wire.Vector(tSchemaBinary, bin), wire.Scalar(tSchemaBinOut, b2f(s.cfg.Schema.BinaryOutcome)),
		wire.Scalar(tMomentsN, float64(mo.N)), wire.Vector(tMomentsSum, mo.Sum), wire.Vector(tMomentsSumSq, mo.SumSq),
		wire.Vector(tMomentsLog, logMoments(mo)),
	}, columnDigests(s.cfg.Columns, s.cfg.Schema), wire.DigestList{Name: dOmega0, Digests: []wire.Digest{s.fp}})
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
	setup, err := estimator.NewSetup(ctx, s.cfg.Schema, s.cfg.Spectral, s.cfgE, scaler)
	if err != nil {
		return err
	}
	if frequencyDigest(setup) != s.fp {
		return fmt.Errorf("%w: the kernel plugin is not deterministic", ErrFrequencies)
	}
	s.res.Setup = setup
	s.train, err = estimator.NewSite(s.res.Index, s.kept, setup)
	if err != nil {
		return err
	}
	s.log.Info("de-duplication applied", slog.Int("rows_kept", len(s.res.Kept)), slog.Int("rows_dropped", n-len(s.res.Kept)))
	return nil
}

// subset returns the rows at positions keep of d.
func subset(d *estimator.Data, keep []int) *estimator.Data {
	if len(keep) == d.Rows() {
		return d
	}
	_, dx := d.X.Dims()
	out := &estimator.Data{X: mat.NewDense(len(keep), dx, nil), W: make([]float64, len(keep)), Y: make([]float64, len(keep))}
	for i, k := range keep {
		out.X.SetRow(i, d.X.RawRowView(k))
		out.W[i], out.Y[i] = d.W[k], d.Y[k]
	}
	return out
}

// compute answers one training round.
func (s *site) compute(ctx context.Context, e *wire.Envelope) ([]*wire.Envelope, error) {
	if s.train == nil {
		return nil, fmt.Errorf("%w: weights before the dedup-verdict", ErrProtocol)
	}
	kind, err := parseKind(e.Model)
	if err != nil {
		return nil, err
	}
	w, err := matrices(e, pWeights)
	if err != nil {
		return nil, err
	}
	sh := vectors(e, pShared)
	if err := checkBlocks(s.res.Setup, kind, w, sh); err != nil {
		return nil, err
	}
	round, err := integer(e, tRound)
	if err != nil {
		return nil, err
	}
	noise, err := integer(e, tNoise)
	if err != nil {
		return nil, err
	}
	out, err := s.train.Compute(ctx, &estimator.SiteInput{Model: kind, Round: round, Noise: uint64(noise), Weights: w, Shared: sh})
	if err != nil {
		return nil, err
	}
	if s.cfg.Loss != nil {
		s.cfg.Loss(kind, round, out.Loss)
	}
	ts := append(wire.Matrices(pGrads, out.Grads), wire.Vectors(pShared, out.Shared)...)
	ts = append(ts, wire.Scalar(tLoss, out.Loss), wire.Scalar(tRows, float64(out.Rows)))
	g, err := s.reply(e, wire.KindGradient, ts)
	if err != nil {
		return nil, err
	}
	return []*wire.Envelope{g}, nil
}

// score takes the final weights, scores every row and answers the local ATE.
func (s *site) score(ctx context.Context, e *wire.Envelope) ([]*wire.Envelope, error) {
	if s.train == nil {
		return nil, fmt.Errorf("%w: final weights before the dedup-verdict", ErrProtocol)
	}
	s.train.Release()
	own := map[estimator.Kind]estimator.SiteWeights{}
	for _, kind := range estimator.Kinds {
		p := kind.String() + "."
		w, err := matrices(e, p+pWeights)
		if err != nil {
			return nil, err
		}
		sh := vectors(e, p+pShared)
		if err := checkBlocks(s.res.Setup, kind, w, sh); err != nil {
			return nil, err
		}
		own[kind] = estimator.SiteWeights{Weights: w, Shared: sh}
		if s.res.Lambda[kind], err = vector(e, p+tLambda, s.res.Sites); err != nil {
			return nil, err
		}
		if s.res.Rounds[kind], err = integer(e, p+tRounds); err != nil {
			return nil, err
		}
	}
	model, err := estimator.NewSiteModel(s.res.Setup, s.res.Index, own)
	if err != nil {
		return nil, err
	}
	s.res.Model = model
	eff, err := model.Effects(ctx, s.res.Index, s.cfg.Data)
	if err != nil {
		return nil, err
	}
	s.res.Effects = eff
	cate := make([]float64, len(s.res.Kept))
	for i, k := range s.res.Kept {
		cate[i] = eff.CATE[k]
	}
	n := len(cate)
	s.res.Local = SiteATE{ATE: stat.Mean(cate, nil), N: n}
	if n > 1 {
		s.res.Local.SE = stat.StdDev(cate, nil) / math.Sqrt(float64(n))
	}
	a, err := s.reply(e, wire.KindATE, []wire.Tensor{wire.Scalar(tATE, s.res.Local.ATE), wire.Scalar(tSE, s.res.Local.SE), wire.Scalar(tN, float64(n))})
	if err != nil {
		return nil, err
	}
	return []*wire.Envelope{a}, nil
}

// global takes the global ATE, publishes the results and confirms with done.
func (s *site) global(ctx context.Context, e *wire.Envelope) ([]*wire.Envelope, error) {
	if s.res == nil || s.res.Effects == nil {
		return nil, fmt.Errorf("%w: global-ate before the final weights", ErrProtocol)
	}
	var err error
	if s.res.Global.ATE, err = scalar(e, tATE); err != nil {
		return nil, err
	}
	if s.res.Global.SE, err = scalar(e, tSE); err != nil {
		return nil, err
	}
	if s.res.Global.N, err = integer(e, tN); err != nil {
		return nil, err
	}
	if s.cfg.Publish != nil {
		if err := s.cfg.Publish(ctx, s.res); err != nil {
			return nil, fmt.Errorf("publish results: %w", err)
		}
	}
	d, err := s.reply(e, wire.KindDone, []wire.Tensor{wire.Scalar(tStatus, 1)})
	if err != nil {
		return nil, err
	}
	return []*wire.Envelope{d}, nil
}

// refused turns the coordinator's done into the site's error.
func (s *site) refused(e *wire.Envelope) error {
	if col, err := integer(e, tRefusedColumn); err == nil {
		name := "the outcome"
		if col < len(s.cfg.Columns) {
			name = fmt.Sprintf("covariate %q", s.cfg.Columns[col])
		} else if col < len(s.cfg.Schema.Binary) {
			name = fmt.Sprintf("covariate %d", col)
		}
		return fmt.Errorf("%w: %w: %s (name or type) differs from the federation's", ErrRefused, ErrSchema, name)
	}
	if _, err := scalar(e, tRefusedKernel); err == nil {
		return fmt.Errorf("%w: %w", ErrRefused, ErrFrequencies)
	}
	return fmt.Errorf("%w: the coordinator aborted run %s", ErrRefused, e.RunID)
}
