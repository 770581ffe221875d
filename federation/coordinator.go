package federation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/selection"
)

// Log keys of the roles, fixed so that log lines can be searched. Envelope
// headers use the keys of package wire.
const (
	LogKeySite    = "site"
	LogKeySites   = "sites"
	LogKeyReason  = "reason"
	LogKeyAttempt = "attempt"
	LogKeyColumn  = "column"
	LogKeySeconds = "seconds"
	LogKeyRepeats = "repeats"
	LogKeyDir     = "direction"
	// LogKeySubgroup names a federated subgroup.
	LogKeySubgroup = "subgroup"
)

// CoordinatorConfig configures a coordinator.
type CoordinatorConfig struct {
	Name  string   // the coordinator's federation name
	RunID string   // the run's id (wire.Header.RunID)
	Sites []string // the sites' names, in priority order (de-duplication keeps the first listed)

	Config   estimator.Config   // the model configuration every site is sent
	Spectral estimator.Spectral // the kernel: the reference base frequencies
	// KernelName, when set, names the kernel in hello, so that a site
	// with several kernels (SiteConfig.Kernels) trains this one; a site
	// with one trains its own, and is refused when its frequencies differ.
	KernelName string
	// Selection, when on, has the sites hold rows out and chooses the
	// estimator they report on them.
	Selection Selection
	// Extra are further kernels to choose among (Selection must be on):
	// every site trains their models too, after the run's kernel's, and
	// their latent and outcome models are candidates. The sites must have
	// their plugins (SiteConfig.Kernels); their GridPoints must be zero.
	Extra []selection.Kernel
	// Subgroups are the federated subgroups the sites are asked to
	// evaluate (CheckSubgroups); each site's policy decides.
	Subgroups []Subgroup

	// RoundTimeout is how long to wait for every site's answer to a step
	// before sending it again to the silent ones; Retries is how often.
	RoundTimeout time.Duration
	Retries      int

	// Checkpoints, when set, stores the coordinator's state after every
	// model and, in training, every CheckpointEvery rounds and whenever
	// CheckpointInterval has passed since the last save (either may be
	// zero for none; every round when both are); it is asked for the state
	// at start.
	Checkpoints        Checkpointer
	CheckpointEvery    int
	CheckpointInterval time.Duration

	Logger  *slog.Logger // nil discards
	Metrics *Metrics     // nil counts nothing
}

// Result is what a coordinator's run produced.
type Result struct {
	RunID  string
	Setup  *estimator.Setup
	Models map[estimator.Kind]*estimator.Trained
	// ExtraModels are the models of each of CoordinatorConfig.Extra.
	ExtraModels []map[estimator.Kind]*estimator.Trained
	LocalATE    []float64        // per site: its plug-in ATE (mean CATE)
	LocalAIPW   []inference.Sums // per site: the sums of its AIPW scores
	Clipped     []int            // per site: rows whose propensity it clipped
	Rows        []int            // per site: n behind its ATEs
	GlobalATE   float64          // the plug-in ATE over every site's rows
	// GlobalAIPW is the AIPW estimate over every site's rows, from the
	// added sums, with its standard error and 95% interval, which include
	// the noise of the private sites' sums (LocalAIPW[s].NoiseVar).
	GlobalAIPW inference.Estimate
	Dropped    []int // per site: rows left out by de-duplication
	// Sites are the sites the run covered (CoordinatorConfig.Sites), in
	// the order of the per-site lists above.
	Sites []string
	// Selection is the run's model selection, nil when it selected none.
	Selection *SelectState
	// GATE are the global effects of CoordinatorConfig.Subgroups, by
	// index; nil for a subgroup no site evaluated.
	GATE []*GlobalGATE
	// Heterogeneity are the pooled tests of heterogeneity (each nil: not
	// pooled).
	Heterogeneity GlobalHeterogeneity
	// PrivateSites counts the sites whose answers carried differential
	// privacy noise. The AIPW intervals cover the noise of their ATE sums,
	// not the training noise's effect on the models.
	PrivateSites int
}

// maxRoundsBetweenSaves bounds the training rounds between two checkpoints
// written by time (CheckpointInterval): more than a million rounds a
// second for a minute.
const maxRoundsBetweenSaves = 1 << 26

// resumeGap bounds the steps a coordinator sends between its last
// checkpoint of a model and the next one (the final weights, ate, global-ate
// and done steps), with room to spare.
const resumeGap = 8

// coordinator is the state of one coordinator run.
type coordinator struct {
	cfg     CoordinatorConfig
	conn    Conn
	log     *slog.Logger
	step    uint64
	tracker *wire.Tracker
	index   map[string]int
	// refuser is the site that refused the run, "" when none did: it has
	// stopped, so abort does not tell it the run is over.
	refuser string
	// state restored from or saved to checkpoints
	st *State
	// setups are the run's kernels' setups, its own first, once the
	// pooled scaler is known.
	setups []*estimator.Setup
}

// CheckSites returns an error unless every site name is a valid
// federation name (wire.CheckName) listed once.
func CheckSites(sites []string) error {
	seen := map[string]bool{}
	for _, s := range sites {
		if err := wire.CheckName(s); err != nil {
			return fmt.Errorf("site %q: %w", s, err)
		}
		if seen[s] {
			return fmt.Errorf("federation: site %q listed twice", s)
		}
		seen[s] = true
	}
	return nil
}

// RunCoordinator runs one complete federation run over conn and returns its
// result. Sites must be listening already or join within the retries. An
// error of the run itself is a *RunError naming the run.
func RunCoordinator(ctx context.Context, cfg CoordinatorConfig, conn Conn) (*Result, error) {
	if len(cfg.Sites) == 0 {
		return nil, errors.New("federation: no sites configured")
	}
	if err := cfg.Selection.check(); err != nil {
		return nil, err
	}
	if err := checkExtra(cfg.Selection, cfg.Extra); err != nil {
		return nil, err
	}
	if err := CheckSubgroups(cfg.Subgroups); err != nil {
		return nil, err
	}
	if cfg.RoundTimeout <= 0 {
		cfg.RoundTimeout = time.Minute
	}
	if cfg.CheckpointEvery <= 0 && cfg.CheckpointInterval <= 0 {
		cfg.CheckpointEvery = 1
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &coordinator{cfg: cfg, conn: conn, log: log, index: map[string]int{}}
	if err := CheckSites(cfg.Sites); err != nil {
		return nil, err
	}
	for i, s := range cfg.Sites {
		c.index[s] = i
	}
	if cfg.Checkpoints != nil {
		st, err := cfg.Checkpoints.Load(ctx)
		if err != nil {
			return nil, fmt.Errorf("load checkpoint: %w", err)
		}
		if st != nil {
			if !slices.Equal(st.Sites, cfg.Sites) {
				return nil, fmt.Errorf("%w: checkpoint of run %s has sites %v, configuration %v", ErrCheckpointSites, st.RunID, st.Sites, cfg.Sites)
			}
			if names := extraNames(cfg.Extra); !slices.Equal(st.Kernels, names) {
				return nil, fmt.Errorf("%w: checkpoint of run %s chooses among the further kernels %v, configuration %v", ErrCheckpointKernels, st.RunID, st.Kernels, names)
			}
			if !slices.Equal(st.Subgroups, cfg.Subgroups) {
				return nil, fmt.Errorf("%w: checkpoint of run %s asks about the subgroups %v, configuration %v", ErrCheckpointSubgroups, st.RunID, subgroupNames(st.Subgroups), subgroupNames(cfg.Subgroups))
			}
			c.st = st
			log.Info("resuming run from checkpoint", slog.String(wire.LogKeyRun, st.RunID), slog.Uint64(wire.LogKeyRound, st.Step))
		}
	}
	res, err := c.run(ctx)
	if err != nil {
		c.abort(ctx, err)
		return nil, &RunError{RunID: c.runID(), Err: err}
	}
	if cfg.Checkpoints != nil {
		if err := cfg.Checkpoints.Clear(ctx); err != nil {
			return res, fmt.Errorf("clear checkpoint: %w", err)
		}
	}
	return res, nil
}

// abort tells every site that the run is over, best effort.
func (c *coordinator) abort(ctx context.Context, cause error) {
	if c.tracker == nil || ctx.Err() != nil {
		return // a stopped coordinator leaves the sites waiting: it may resume
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	c.step++
	for i, s := range c.cfg.Sites {
		if c.st != nil && c.st.Finish != nil && i < len(c.st.Finish.Done) && c.st.Finish.Done[i] {
			continue // it has its results, and may have left
		}
		if s == c.refuser {
			continue // it ended the run, and has stopped
		}
		e, err := c.envelope(s, "", wire.KindDone, []wire.Tensor{wire.Scalar(tStatus, -1)})
		if err == nil {
			_ = c.send(ctx, e)
		}
	}
	c.log.Error("run aborted", slog.String(wire.LogKeyRun, c.runID()), slog.String(LogKeyReason, cause.Error()))
}

func (c *coordinator) runID() string {
	if c.st != nil {
		return c.st.RunID
	}
	return c.cfg.RunID
}

func (c *coordinator) envelope(site, model string, kind wire.Kind, ts []wire.Tensor, lists ...wire.DigestList) (*wire.Envelope, error) {
	return wire.New(wire.Header{RunID: c.runID(), Model: model, Round: c.step, Kind: kind, Sender: c.cfg.Name, Recipient: site}, ts, lists...)
}

func (c *coordinator) send(ctx context.Context, e *wire.Envelope) error {
	if err := c.conn.Send(ctx, e); err != nil {
		return fmt.Errorf("send %s to %s: %w", e.Kind, e.Recipient, err)
	}
	c.cfg.Metrics.sent(e)
	c.log.Debug("envelope", slog.String(LogKeyDir, "sent"), slog.Any("envelope", e))
	return nil
}

// exchange sends out[s] to every site s (nil for none) at the current step
// and waits for every site's answers of the kinds want, resending to the
// silent sites on each timeout.
func (c *coordinator) exchange(ctx context.Context, out []*wire.Envelope, want ...wire.Kind) ([]map[wire.Kind]*wire.Envelope, error) {
	return c.exchangeSome(ctx, out, nil, nil, want...)
}

// exchangeSome is exchange that neither sends to nor waits for the sites s
// with skip[s] (a nil skip waits for every site). When answered is not nil,
// it is called with each site's index as soon as all of that site's answers
// are in, before the others arrive, so that the caller can save what it
// learned while the exchange goes on; its error ends the exchange.
func (c *coordinator) exchangeSome(ctx context.Context, out []*wire.Envelope, skip []bool,
	answered func(s int) error, want ...wire.Kind) ([]map[wire.Kind]*wire.Envelope, error) {
	if err := c.tracker.Advance(c.step); err != nil {
		return nil, err
	}
	got := make([]map[wire.Kind]*wire.Envelope, len(c.cfg.Sites))
	for i := range got {
		got[i] = map[wire.Kind]*wire.Envelope{}
	}
	skipped := func(s int) bool { return s < len(skip) && skip[s] }
	waiting := func(s int) bool { return len(got[s]) < len(want) && !skipped(s) }
	reported := make([]bool, len(c.cfg.Sites))
	pending := func() []string {
		var p []string
		for s, name := range c.cfg.Sites {
			if waiting(s) {
				p = append(p, name)
			}
		}
		return p
	}
	for attempt := 0; ; attempt++ {
		for s, e := range out {
			if e != nil && waiting(s) {
				if err := c.send(ctx, e); err != nil {
					c.log.Warn("send failed", slog.String(LogKeySite, c.cfg.Sites[s]), slog.String(LogKeyReason, err.Error()))
				}
			}
		}
		timer := time.NewTimer(c.cfg.RoundTimeout)
	wait:
		for len(pending()) > 0 {
			select {
			case <-ctx.Done():
				timer.Stop()
				return nil, ctx.Err()
			case <-timer.C:
				break wait
			case e, ok := <-c.conn.Inbox():
				if !ok {
					timer.Stop()
					return nil, ErrTransportClosed
				}
				s, err := c.receive(ctx, e, got, out, want)
				if err != nil {
					timer.Stop()
					return nil, err
				}
				if s < 0 || answered == nil || reported[s] || skipped(s) || waiting(s) {
					continue
				}
				reported[s] = true
				if err := answered(s); err != nil {
					timer.Stop()
					return nil, err
				}
			}
		}
		timer.Stop()
		p := pending()
		if len(p) == 0 {
			return got, nil
		}
		if attempt >= c.cfg.Retries {
			return nil, &SitesError{Sites: p, Err: fmt.Errorf("%w: %v did not answer %s step %d within %s after %d retries",
				ErrSilent, p, want[0], c.step, c.cfg.RoundTimeout, c.cfg.Retries)}
		}
		c.log.Warn("sites silent; sending again", slog.Any(LogKeySites, p), slog.Uint64(wire.LogKeyRound, c.step), slog.Int(LogKeyAttempt, attempt+1))
	}
}

// receive admits one incoming envelope into got, or drops and logs it. It
// returns the index of the site whose answer it admitted, -1 for none, and
// an ErrSiteRefused error when the envelope is a site's refusal of the run.
func (c *coordinator) receive(ctx context.Context, e *wire.Envelope, got []map[wire.Kind]*wire.Envelope, out []*wire.Envelope, want []wire.Kind) (int, error) {
	c.cfg.Metrics.received(e)
	c.log.Debug("envelope", slog.String(LogKeyDir, "received"), slog.Any("envelope", e))
	drop := func(reason string) {
		c.cfg.Metrics.dropped()
		c.log.Warn("envelope dropped", slog.Any("envelope", e), slog.String(LogKeyReason, reason))
	}
	s, ok := c.index[e.Sender]
	if !ok || e.Recipient != c.cfg.Name {
		drop("unknown sender or not addressed to the coordinator")
		return -1, nil
	}
	// A refusal may answer a past step of the run: a site refuses the
	// dedup-verdict, which it does not otherwise answer, while the
	// coordinator waits for the first gradients.
	if e.Kind == wire.KindDone && e.RunID == c.runID() {
		if status, err := scalar(e, tStatus); err == nil && status < 0 {
			return -1, c.refused(s, e)
		}
	}
	if v, err := c.tracker.Admit(e); v != wire.Current {
		drop(err.Error())
		return -1, nil
	}
	if e.Kind == wire.KindHello && c.step > 2 {
		if _, ok := e.Tensor(tRejoin); ok {
			c.rejoin(ctx, s, out[s])
			return -1, nil
		}
	}
	if e.Kind == wire.KindATE && c.st.Finish != nil && !slices.Contains(want, e.Kind) {
		c.recheckATE(s, e)
		return -1, nil
	}
	if !slices.Contains(want, e.Kind) {
		drop(fmt.Sprintf("unexpected kind %s at this step", e.Kind))
		return -1, nil
	}
	got[s][e.Kind] = e
	return s, nil
}

// refused is the error that ends the run when site s refuses it with the
// done e: ErrSiteRefused naming the site and its reason, which is all a
// refusal says.
func (c *coordinator) refused(s int, e *wire.Envelope) error {
	name := c.cfg.Sites[s]
	c.refuser = name
	// A code that is missing or not a count reads as 0, unknown.
	code, _ := integer(e, tRefusalReason)
	return &SitesError{Sites: []string{name}, Err: fmt.Errorf("%s %w: %s", name, ErrSiteRefused, refusal(code))}
}

func (c *coordinator) run(ctx context.Context) (*Result, error) {
	if c.st == nil {
		sel := c.cfg.Selection
		// One site's own choice is the federation's (selection.Options.BySite).
		sel.BySite = sel.BySite && len(c.cfg.Sites) > 1
		c.st = &State{RunID: c.cfg.RunID, Sites: c.cfg.Sites, Config: c.cfg.Config, Every: c.cfg.CheckpointEvery,
			Interval: c.cfg.CheckpointInterval, Select: sel, Kernels: extraNames(c.cfg.Extra),
			Subgroups: c.cfg.Subgroups}
		c.tracker = wire.NewTracker(c.st.RunID, 0)
		if err := c.handshake(ctx); err != nil {
			return nil, err
		}
	} else {
		if len(c.st.Trained) != c.st.Kind || c.st.Kind > c.st.models() {
			return nil, fmt.Errorf("checkpoint of run %s is inconsistent: %d models trained, model %d in training", c.st.RunID, len(c.st.Trained), c.st.Kind)
		}
		if err := c.st.checkResumable(len(c.cfg.Sites), c.cfg.Config); err != nil {
			return nil, fmt.Errorf("checkpoint of run %s: %w", c.st.RunID, err)
		}
		if f := c.st.Finish; f != nil {
			if c.st.Kind != c.st.models() {
				return nil, fmt.Errorf("checkpoint of run %s is inconsistent: finishing with model %d in training", c.st.RunID, c.st.Kind)
			}
			// A Checkpointer need not decode through DecodeState.
			if err := f.check(len(c.cfg.Sites)); err != nil {
				return nil, fmt.Errorf("checkpoint of run %s: %w", c.st.RunID, err)
			}
		}
		// Steps after the checkpoint may have been sent before the stop;
		// skip past all of them so that the sites take the resumed steps
		// as new.
		c.step = c.st.Step + c.st.roundsBetweenSaves() + resumeGap
		c.tracker = wire.NewTracker(c.st.RunID, c.step)
		var err error
		if c.setups, err = setupsFor(ctx, c.st.Schema, c.spectra(), c.st.Config, c.points(), c.st.Scaler); err != nil {
			return nil, err
		}
	}
	setup := c.setups[0]
	if err := c.train(ctx); err != nil {
		return nil, err
	}
	if c.st.Finish == nil {
		if err := c.selectModel(ctx); err != nil {
			return nil, err
		}
	}
	return c.finish(ctx, setup)
}

// spectra are the run's kernels, its own first.
func (c *coordinator) spectra() []estimator.Spectral {
	out := []estimator.Spectral{c.cfg.Spectral}
	for _, k := range c.cfg.Extra {
		out = append(out, k.Spectral)
	}
	return out
}

// points are the grid points of the run's further kernels, in order (a
// transfer mode at most: checkExtra).
func (c *coordinator) points() []selection.GridPoint {
	out := make([]selection.GridPoint, len(c.cfg.Extra))
	for k, e := range c.cfg.Extra {
		out[k] = e.GridPoint
	}
	return out
}

// kernelNames are the names of the run's kernels in candidate names, its
// own first.
func (c *coordinator) kernelNames() []string {
	return append([]string{c.st.Select.Kernel}, c.st.Kernels...)
}

// extraNames are the names of the kernels extra.
func extraNames(extra []selection.Kernel) []string {
	var out []string
	for _, k := range extra {
		out = append(out, k.Name)
	}
	return out
}
