package federation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/crffd/crffd/balance"
	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/selection"
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
	// ColumnKey keys the column fingerprints (HMAC-SHA256): the secret the
	// sites share and the coordinator does not. Every site of a federation
	// needs the same key, or none; without one the fingerprints are
	// unkeyed SHA-256, which a dictionary of likely names reverses.
	ColumnKey []byte
	// Identities are the HMACs of the rows' identity columns (IdentityHMAC),
	// one per row; nil when the site has no identity columns.
	Identities []wire.Digest

	Spectral   estimator.Spectral // the kernel plugin
	KernelName string             // the kernel's name in model selection's candidate names
	// Kernels, when set, opens the plugin of a further kernel a run
	// chooses among (CoordinatorConfig.Extra), by its name in candidate
	// names. A site without it trains its own kernel alone, and refuses a
	// run that asks for more (ErrNoKernel). Limits.Kernels bounds how
	// many a run may ask for.
	Kernels func(ctx context.Context, name string) (estimator.Spectral, error)

	// MinArmRows is the fewest rows each treatment arm must have, before
	// and after de-duplication, for the site to send anything computed
	// from its rows. The outcome model's gradient for an arm sums over
	// that arm's rows only, so an arm of one row would put that row's
	// features on the wire. Zero means DefaultMinArmRows; a negative
	// value turns the guard off (tests only).
	MinArmRows int

	// Limits bound what the coordinator may ask of the site (Limits);
	// zero fields take DefaultLimits' values.
	Limits Limits
	// Privacy, when set, makes the site's training answers differentially
	// private under its own budget (SitePrivacy).
	Privacy *SitePrivacy

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
	// its own rows for a model at a round, each time it computes one; the
	// model is named as envelopes name it: its kind (latent), and for a
	// further kernel k of model selection the kind and k (latent.1).
	Loss func(model string, round int, loss float64)
	// Publish, when set, is called with the results before the site
	// confirms the run with done.
	Publish func(ctx context.Context, r *SiteResult) error

	// Subgroups is the site's policy on the coordinator's subgroups
	// (none by default), and SubgroupRows, when set, reports which of
	// Data's rows a predicate selects, or an error for one it refuses.
	Subgroups    SubgroupPolicy
	SubgroupRows func(ctx context.Context, predicate string) ([]bool, error)

	Logger  *slog.Logger // nil discards
	Metrics *Metrics     // nil counts nothing
}

// SiteResult is what a site holds after a run.
type SiteResult struct {
	// Subgroups are the subgroups the coordinator asked about, and
	// GlobalGATE their global effects by index (nil: none).
	Subgroups  []Subgroup
	GlobalGATE []*GlobalGATE
	// GlobalHeterogeneity are the run's pooled tests of heterogeneity
	// (each nil: not pooled).
	GlobalHeterogeneity GlobalHeterogeneity

	RunID        string
	Index, Sites int
	Setup        *estimator.Setup
	Model        *estimator.Model // the site's own model (estimator.NewSiteModel)
	// Models are the site's models of every kernel of the run: Model,
	// then those of the further kernels a model selection chose among,
	// named in Kernels (the site's own first).
	Models  []*estimator.Model
	Kernels []string
	Kept    []int              // positions of the rows trained on (not dropped as duplicates)
	Effects *estimator.Effects // every row's effects, in Data order
	// Calibration corrects the CATEs in Effects and gives their intervals
	// (inference.Calibration); nil when the site has too few rows for one.
	Calibration *inference.Calibration
	// Stack is the super learner's choice of the nuisances of the kept
	// rows' ψ; nil when they came from the run's private models.
	Stack  *inference.Stack
	Local  inference.ATEs // over the kept rows
	Global inference.ATEs
	// Private is set when this site's answers carried differential privacy
	// noise, and PrivateSites counts the run's sites whose did. Local is
	// computed from the site's exact scores, which never leave it; the
	// AIPW interval of Global includes the variance of the noise that the
	// private sites added to their sums (Global.AIPW.NoiseSE), not the
	// bias of their clipping, nor the effect of the training noise on the
	// models.
	Private      bool
	PrivateSites int
	// Released is what a private site released of its ATE's sums with
	// noise, with the rows its clipping changed (which it never sends);
	// nil when it sent them exactly.
	Released *ATERelease
	// Balance is the balance sums of every site's rows, added by the
	// coordinator (package balance): the site computes the global balance
	// from them with its own covariate names. It is nil when a site sent
	// none (a private site, or an older crffd).
	Balance *balance.Sums
	// LocalBalance is the balance sums of this site's rows that its hello
	// sent, so that the site's own balance needs no second propensity
	// fit; nil when it sent none.
	LocalBalance *balance.Sums
	Lambda       map[estimator.Kind][]float64 // the site's row of each model's Λ
	Peers        []string                     // every site's name, by index (Lambda's columns)
	Rounds       map[estimator.Kind]int
	// CATE is every row's CATE, in Data order, by the estimator the run
	// chose (Selection), or the latent CATE of Effects when it chose none.
	CATE []float64
	// Scores are every row's AIPW score ψ in Data order, NaN for a row
	// not kept, and ScoreClipped whether its propensity was clipped: the
	// local AIPW ATE is the mean of Scores.
	Scores       []float64
	ScoreClipped []bool
	// Control are every row's control-arm scores Γ0 in Data order, NaN
	// for a row not kept (inference.ControlScores): with Scores, the value
	// of a treatment rule.
	Control []float64
	// Selection is the run's model selection, nil when it made none; the
	// models were then trained on the rows not in Held.
	Selection *SiteSelection
	Held      []int // positions in Kept of the rows held out for model selection
}

// DefaultMinArmRows is SiteConfig.MinArmRows when it is zero. Five is the
// smallest cell count that common statistical disclosure rules publish.
const DefaultMinArmRows = 5

// minArmRows is MinArmRows, or its default when zero.
func (c *SiteConfig) minArmRows() int {
	if c.MinArmRows == 0 {
		return DefaultMinArmRows
	}
	return c.MinArmRows
}

// checkArms refuses rows with fewer than the configured minimum in either
// treatment arm. stage says which rows: before or after de-duplication.
func (c *SiteConfig) checkArms(d *estimator.Data, stage string) error {
	least := c.minArmRows()
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
	// share is the run's held-out share (hello; 0: no selection), and
	// trainPos the positions among the kept rows of those not held out
	// (res.Held), which the models train on (nil: every kept row); they
	// are read in place.
	share    float64
	trainPos []int
	// heldAll are the positions among all the site's rows of those held
	// out, drawn at hello (drawHoldout; nil: none).
	heldAll []int
	// nu are the nuisances cross-fitted on the kept rows, once computed
	// (for the held-out losses): the AIPW ATE reuses them.
	nu *inference.Nuisance
	// own are the site's own training rows' ridge statistics, once
	// computed (for the site-local candidates).
	own *selection.Stats
	// pairs are the Pairs of the site's validation rows, once computed
	// (exactly: not at a site that noises its selection).
	pairs *selection.Pairs
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
	// answered counts the rounds of each model answered in the run, and
	// charge is the run's privacy charge (nil without SiteConfig.Privacy);
	// ledger keeps charges when SitePrivacy.Ledger is nil.
	answered map[string]int
	charge   *runCharge
	aggRand  *rand.Rand     // draws the aggregates' noise; nil until the first
	noised   *noisedAnswers // model selection's noised answers of the run (privacy_selection.go)
	ledger   *memoryLedger
	// training is the model the site last answered a round of ("" for
	// none), and since when, for the one INFO line it logs per model
	// trained.
	training      string
	trainingSince time.Time
	// spectra are the run's kernels, the site's own first, and setups
	// their setups once the pooled scaler is known (setups[0] is
	// res.Setup); fps are their frequency fingerprints. train trains the
	// models of kernel trainKernel.
	spectra     []estimator.Spectral
	setups      []*estimator.Setup
	fps         []wire.Digest
	trainKernel int
}

// trained logs, at INFO, that the model the site was answering rounds of
// is done: at the first round of another model, and at the final weights.
func (s *site) trained(next string) {
	if s.training != "" && next != s.training {
		s.log.Info("model trained", slog.String(wire.LogKeyRun, s.runID()), slog.String(wire.LogKeyModel, s.training),
			slog.Int("rounds", s.answered[s.training]), slog.Duration("took", time.Since(s.trainingSince).Round(time.Millisecond)))
	}
	if next != s.training {
		s.training, s.trainingSince = next, time.Now()
	}
}

// RunError is the error that ended a run, with the run's id: at a site
// (RunSite), and at the coordinator (RunCoordinator), where the id is the
// checkpoint's when the run was resumed.
type RunError struct {
	RunID string
	Err   error
}

func (e *RunError) Error() string { return fmt.Sprintf("run %s: %v", e.RunID, e.Err) }

// Unwrap returns the error that ended the run.
func (e *RunError) Unwrap() error { return e.Err }

// RunSite takes part in one federation run over conn: it waits for the
// coordinator's hello of a run, answers every step, publishes the results
// and returns them once it has confirmed the run with done.
//
// A site that refuses the run (ErrTooFewRows, ErrRowsChanged, or a Join
// error wrapping ErrTooFewChanged) sends the coordinator a done saying so
// and why, and returns its error. An error of a run under way is a
// *RunError naming the run. A table with too few rows in an arm is
// refused in answer to the first hello, so that the coordinator hears of
// it rather than waiting out its retries.
func RunSite(ctx context.Context, cfg SiteConfig, conn Conn) (*SiteResult, error) {
	s, err := newSite(cfg, conn)
	if err != nil {
		return nil, err
	}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, ok := <-conn.Inbox():
			if !ok {
				return nil, ErrTransportClosed
			}
			done, err := s.handle(ctx, e)
			if err != nil && s.tracker != nil {
				err = &RunError{RunID: s.runID(), Err: err}
			}
			if err != nil || done {
				return s.res, err
			}
		}
	}
}

// newSite returns the state of a site that has seen no envelope yet.
func newSite(cfg SiteConfig, conn Conn) (*site, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &site{cfg: cfg, conn: conn, log: log, instance: float64(rand.Uint64N(1<<52) + 1)}
	if err := s.useRows(SiteRows{cfg.Data, cfg.Schema, cfg.Columns, cfg.Identities}); err != nil {
		return nil, err
	}
	return s, nil
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
		s.res, s.kept, s.train, s.trainPos, s.nu, s.own, s.pairs = nil, nil, nil, nil, nil, nil, nil
		s.answered, s.charge = map[string]int{}, nil
		s.spectra, s.setups, s.fps, s.trainKernel = nil, nil, nil, 0
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
		out, err = s.final(ctx, e)
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

// refused turns the coordinator's done into the site's error.
func (s *site) refused(e *wire.Envelope) error {
	if col, err := integer(e, tRefusedColumn); err == nil {
		name := "the outcome"
		if col < len(s.cfg.Columns) {
			name = fmt.Sprintf("covariate %q", s.cfg.Columns[col])
		} else if col < len(s.cfg.Schema.Binary) {
			name = fmt.Sprintf("covariate %d", col)
		}
		return fmt.Errorf("%w: %w: %s (name or type) differs from the federation's, or the sites' secrets differ (it keys the column fingerprints)", ErrRefused, ErrSchema, name)
	}
	if _, err := scalar(e, tRefusedKernel); err == nil {
		return fmt.Errorf("%w: %w", ErrRefused, ErrFrequencies)
	}
	return fmt.Errorf("%w: the coordinator aborted run %s", ErrRefused, e.RunID)
}
