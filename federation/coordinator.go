package federation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
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
)

// CoordinatorConfig configures a coordinator.
type CoordinatorConfig struct {
	Name  string   // the coordinator's federation name
	RunID string   // the run's id (wire.Header.RunID)
	Sites []string // the sites' names, in priority order (de-duplication keeps the first listed)

	Config   estimator.Config   // the model configuration every site is sent
	Spectral estimator.Spectral // the kernel: the reference base frequencies

	// RoundTimeout is how long to wait for every site's answer to a step
	// before sending it again to the silent ones; Retries is how often.
	RoundTimeout time.Duration
	Retries      int

	// Checkpoints, when set, stores the coordinator's state every
	// CheckpointEvery rounds (1 when zero) and is asked for it at start.
	Checkpoints     Checkpointer
	CheckpointEvery int

	Logger  *slog.Logger // nil discards
	Metrics *Metrics     // nil counts nothing
}

// Result is what a coordinator's run produced.
type Result struct {
	RunID     string
	Setup     *estimator.Setup
	Models    map[estimator.Kind]*estimator.Trained
	LocalATE  []float64 // per site
	LocalSE   []float64
	Rows      []int // per site: n behind its ATE
	GlobalATE float64
	GlobalSE  float64
	Dropped   []int // per site: rows left out by de-duplication
}

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
}

// RunCoordinator runs one complete federation run over conn and returns its
// result. Sites must be listening already or join within the retries.
func RunCoordinator(ctx context.Context, cfg CoordinatorConfig, conn Conn) (*Result, error) {
	if len(cfg.Sites) == 0 {
		return nil, errors.New("federation: no sites configured")
	}
	if cfg.RoundTimeout <= 0 {
		cfg.RoundTimeout = time.Minute
	}
	if cfg.CheckpointEvery <= 0 {
		cfg.CheckpointEvery = 1
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &coordinator{cfg: cfg, conn: conn, log: log, index: map[string]int{}}
	for i, s := range cfg.Sites {
		if err := wire.CheckName(s); err != nil {
			return nil, fmt.Errorf("site %q: %w", s, err)
		}
		if _, dup := c.index[s]; dup {
			return nil, fmt.Errorf("federation: site %q listed twice", s)
		}
		c.index[s] = i
	}
	if cfg.Checkpoints != nil {
		st, err := cfg.Checkpoints.Load(ctx)
		if err != nil {
			return nil, fmt.Errorf("load checkpoint: %w", err)
		}
		if st != nil {
			if !slices.Equal(st.Sites, cfg.Sites) {
				return nil, fmt.Errorf("checkpoint of run %s has sites %v, configuration %v", st.RunID, st.Sites, cfg.Sites)
			}
			c.st = st
			log.Info("resuming run from checkpoint", slog.String(wire.LogKeyRun, st.RunID), slog.Uint64(wire.LogKeyRound, st.Step))
		}
	}
	res, err := c.run(ctx)
	if err != nil {
		c.abort(ctx, err)
		return nil, err
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
	c.log.Info("envelope", slog.String(LogKeyDir, "sent"), slog.Any("envelope", e))
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
					return nil, errors.New("federation: transport closed")
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
			return nil, fmt.Errorf("%w: %v did not answer %s step %d within %s after %d retries",
				ErrSilent, p, want[0], c.step, c.cfg.RoundTimeout, c.cfg.Retries)
		}
		c.log.Warn("sites silent; sending again", slog.Any(LogKeySites, p), slog.Uint64(wire.LogKeyRound, c.step), slog.Int(LogKeyAttempt, attempt+1))
	}
}

// receive admits one incoming envelope into got, or drops and logs it. It
// returns the index of the site whose answer it admitted, -1 for none, and
// an ErrSiteRefused error when the envelope is a site's refusal of the run.
func (c *coordinator) receive(ctx context.Context, e *wire.Envelope, got []map[wire.Kind]*wire.Envelope, out []*wire.Envelope, want []wire.Kind) (int, error) {
	c.cfg.Metrics.received(e)
	c.log.Info("envelope", slog.String(LogKeyDir, "received"), slog.Any("envelope", e))
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
	return fmt.Errorf("%s %w: %s", name, ErrSiteRefused, refusal(code))
}

func (c *coordinator) run(ctx context.Context) (*Result, error) {
	if c.st == nil {
		c.st = &State{RunID: c.cfg.RunID, Sites: c.cfg.Sites, Config: c.cfg.Config, Every: c.cfg.CheckpointEvery}
		c.tracker = wire.NewTracker(c.st.RunID, 0)
		if err := c.handshake(ctx); err != nil {
			return nil, err
		}
	} else {
		if len(c.st.Trained) != c.st.Kind || c.st.Kind > len(estimator.Kinds) {
			return nil, fmt.Errorf("checkpoint of run %s is inconsistent: %d models trained, model %d in training", c.st.RunID, len(c.st.Trained), c.st.Kind)
		}
		if f := c.st.Finish; f != nil {
			if c.st.Kind != len(estimator.Kinds) {
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
		c.step = c.st.Step + uint64(c.st.Every) + resumeGap
		c.tracker = wire.NewTracker(c.st.RunID, c.step)
	}
	setup, err := estimator.NewSetup(ctx, c.st.Schema, c.cfg.Spectral, c.st.Config, c.st.Scaler)
	if err != nil {
		return nil, err
	}
	if err := c.train(ctx, setup); err != nil {
		return nil, err
	}
	return c.finish(ctx, setup)
}

// handshake runs hello and de-duplication and fills c.st.
func (c *coordinator) handshake(ctx context.Context) error {
	m := len(c.cfg.Sites)
	c.step = 1
	out := make([]*wire.Envelope, m)
	for s := range c.cfg.Sites {
		e, err := c.helloFor(s)
		if err != nil {
			return err
		}
		out[s] = e
	}
	got, err := c.exchange(ctx, out, wire.KindHello, wire.KindDedupHashes)
	if err != nil {
		return err
	}
	// Schema: every site must match the first.
	moments := make([]estimator.Moments, m)
	var ref wire.DigestList
	var fp wire.Digest
	hashes := make([][]wire.Digest, m)
	for s, name := range c.cfg.Sites {
		h := got[s][wire.KindHello]
		schema, cols, mo, omega, err := decodeHello(h)
		if err != nil {
			return fmt.Errorf("site %s: %w", name, err)
		}
		if s == 0 {
			c.st.Schema, ref, fp = schema, cols, omega
		} else if col := schemaDiff(c.st.Schema, ref, schema, cols); col >= 0 {
			c.refuse(ctx, name, wire.Scalar(tRefusedColumn, float64(col)))
			return fmt.Errorf("%w: site %s: covariate %d (0-based) differs from site %s's (the site's log names the column)", ErrSchema, name, col, c.cfg.Sites[0])
		}
		moments[s] = mo
		d := got[s][wire.KindDedupHashes]
		if on, _ := scalar(d, tDedupOn); on != 0 {
			l, ok := d.DigestList(dDedup)
			if !ok || len(l.Digests) != mo.N {
				return fmt.Errorf("%w: site %s: dedup-hashes must hold one HMAC per row", ErrProtocol, name)
			}
			hashes[s] = l.Digests
		} else {
			c.log.Info("site sends no identity hashes; its rows are not de-duplicated", slog.String(LogKeySite, name))
		}
		_ = fp
		if omega != fp {
			c.refuse(ctx, name, wire.Scalar(tRefusedKernel, 1))
			return fmt.Errorf("%w: site %s", ErrFrequencies, name)
		}
	}
	scaler, err := estimator.NewScaler(c.st.Schema, moments)
	if err != nil {
		return err
	}
	c.st.Scaler = scaler
	setup, err := estimator.NewSetup(ctx, c.st.Schema, c.cfg.Spectral, c.st.Config, scaler)
	if err != nil {
		return err
	}
	if own := frequencyDigest(setup); own != fp {
		for _, name := range c.cfg.Sites {
			c.refuse(ctx, name, wire.Scalar(tRefusedKernel, 1))
		}
		return fmt.Errorf("%w: the sites' kernel differs from the coordinator's", ErrFrequencies)
	}
	drop, repeats := dedupVerdict(hashes)
	c.log.Info("de-duplicated", slog.Int(LogKeyRepeats, repeats))
	c.st.Dropped = make([]int, m)
	c.st.Rows = make([]int, m)
	c.st.Drop = drop
	c.step = 2
	for s := range c.cfg.Sites {
		c.st.Dropped[s] = len(drop[s])
		c.st.Rows[s] = moments[s].N - len(drop[s])
		e, err := c.verdictFor(s)
		if err != nil {
			return err
		}
		// No answer: the first weights envelope of step 3 confirms it.
		if err := c.send(ctx, e); err != nil {
			return err
		}
	}
	c.st.Step = 2
	return nil
}

// helloFor is the coordinator's hello to site s at the current step. Once
// the handshake has counted the site's rows, that is when the site rejoins,
// it carries the count (the site's moments.n, before de-duplication), which
// the site checks against the rows it has now.
func (c *coordinator) helloFor(s int) (*wire.Envelope, error) {
	ts := append(configTensors(c.st.Config), wire.Scalar(tSiteIndex, float64(s)), wire.Scalar(tSiteCount, float64(len(c.cfg.Sites))))
	for v, name := range c.cfg.Sites {
		ts = append(ts, wire.Scalar(tPeerPrefix+name, float64(v)))
	}
	if s < len(c.st.Rows) && s < len(c.st.Dropped) {
		ts = append(ts, wire.Scalar(tSiteRows, float64(c.st.Rows[s]+c.st.Dropped[s])))
	}
	return c.envelope(c.cfg.Sites[s], "", wire.KindHello, ts)
}

// verdictFor is the dedup-verdict of site s at the current step.
func (c *coordinator) verdictFor(s int) (*wire.Envelope, error) {
	var drop []int
	if s < len(c.st.Drop) {
		drop = c.st.Drop[s]
	}
	ts := append(scalerTensors(c.st.Scaler), wire.Vector(tDedupDrop, ints(drop)))
	return c.envelope(c.cfg.Sites[s], "", wire.KindDedupVerdict, ts)
}

// rejoin brings a restarted site back into the run: it sends the site its
// hello and dedup-verdict again, at the current step, and then the step's
// envelope (out, nil for none). The hello names the rows the site began the
// run with: a site whose rows changed since refuses the run there
// (ErrRowsChanged), and the run stops with ErrSiteRefused. A site answers
// this hello with nothing; older sites answer as to the handshake's, and
// those answers are dropped.
//
// Once the local ATEs are in (c.st.Finish set), the only step left is the
// global ATE, which a site can act on only after scoring its rows with the
// final weights of step 4 of the run: a restarted site has lost them, so
// they are sent again, at the current step, before out. The site answers
// with its local ATE again, which receive checks against the recorded one
// and does not use.
func (c *coordinator) rejoin(ctx context.Context, s int, out *wire.Envelope) {
	c.log.Warn("site rejoins the run", slog.String(LogKeySite, c.cfg.Sites[s]), slog.Uint64(wire.LogKeyRound, c.step))
	h, err := c.helloFor(s)
	if err != nil {
		c.log.Error("rejoin", slog.String(LogKeyReason, err.Error()))
		return
	}
	v, err := c.verdictFor(s)
	if err != nil {
		c.log.Error("rejoin", slog.String(LogKeyReason, err.Error()))
		return
	}
	// A site that confirmed the run is sent no step (out is nil), so it
	// needs no final weights either.
	var w *wire.Envelope
	if c.st.Finish != nil && out != nil {
		if w, err = c.finalWeightsFor(s); err != nil {
			c.log.Error("rejoin", slog.String(LogKeyReason, err.Error()))
			return
		}
	}
	for _, e := range []*wire.Envelope{h, v, w, out} {
		if e == nil {
			continue
		}
		if err := c.send(ctx, e); err != nil {
			c.log.Warn("send failed", slog.String(LogKeySite, c.cfg.Sites[s]), slog.String(LogKeyReason, err.Error()))
			return
		}
	}
}

// refuse tells one site it is refused, best effort.
func (c *coordinator) refuse(ctx context.Context, site string, why wire.Tensor) {
	e, err := c.envelope(site, "", wire.KindDone, []wire.Tensor{wire.Scalar(tStatus, -1), why})
	if err == nil {
		_ = c.send(ctx, e)
	}
}

// decodeHello reads a site's hello.
func decodeHello(e *wire.Envelope) (estimator.Schema, wire.DigestList, estimator.Moments, wire.Digest, error) {
	var schema estimator.Schema
	var mo estimator.Moments
	var fp wire.Digest
	bin, err := vector(e, tSchemaBinary, -1)
	if err != nil {
		return schema, wire.DigestList{}, mo, fp, err
	}
	bo, err := scalar(e, tSchemaBinOut)
	if err != nil {
		return schema, wire.DigestList{}, mo, fp, err
	}
	schema.Binary = make([]bool, len(bin))
	for j, v := range bin {
		schema.Binary[j] = v != 0
	}
	schema.BinaryOutcome = bo != 0
	cols, ok := e.DigestList(dSchemaColumns)
	if !ok || len(cols.Digests) != len(bin) {
		return schema, cols, mo, fp, fmt.Errorf("%w: hello lacks one column digest per covariate", ErrProtocol)
	}
	if mo.N, err = integer(e, tMomentsN); err != nil {
		return schema, cols, mo, fp, err
	}
	sum, err := vector(e, tMomentsSum, len(bin)+1)
	if err != nil {
		return schema, cols, mo, fp, err
	}
	sq, err := vector(e, tMomentsSumSq, len(bin)+1)
	if err != nil {
		return schema, cols, mo, fp, err
	}
	mo.Sum, mo.SumSq = slices.Clone(sum), slices.Clone(sq)
	lg, err := vector(e, tMomentsLog, 3)
	if err != nil {
		return schema, cols, mo, fp, err
	}
	mo.Positive, mo.LogSum, mo.LogSumSq = int(lg[0]), lg[1], lg[2]
	om, ok := e.DigestList(dOmega0)
	if !ok || len(om.Digests) != 1 {
		return schema, cols, mo, fp, fmt.Errorf("%w: hello lacks the frequency fingerprint", ErrProtocol)
	}
	return schema, cols, mo, om.Digests[0], nil
}

// schemaDiff returns the first covariate whose fingerprint differs, -1 when
// none does. A different number of covariates differs at the first missing.
func schemaDiff(a estimator.Schema, ad wire.DigestList, b estimator.Schema, bd wire.DigestList) int {
	n := min(len(ad.Digests), len(bd.Digests))
	for j := range n {
		if ad.Digests[j] != bd.Digests[j] || a.Binary[j] != b.Binary[j] {
			return j
		}
	}
	if len(ad.Digests) != len(bd.Digests) {
		return n
	}
	if a.BinaryOutcome != b.BinaryOutcome {
		return len(ad.Digests) // the outcome
	}
	return -1
}

// train trains the models not yet finished.
func (c *coordinator) train(ctx context.Context, setup *estimator.Setup) error {
	m := len(c.cfg.Sites)
	for c.st.Kind < len(estimator.Kinds) {
		kind := estimator.Kinds[c.st.Kind]
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
		for !co.Done() {
			start := time.Now()
			ins := co.Inputs()
			c.step++
			env := make([]*wire.Envelope, m)
			for s, in := range ins {
				ts := append(wire.Matrices(pWeights, in.Weights), wire.Vectors(pShared, in.Shared)...)
				ts = append(ts, wire.Scalar(tRound, float64(in.Round)), wire.Scalar(tNoise, float64(in.Noise)))
				if env[s], err = c.envelope(c.cfg.Sites[s], kind.String(), wire.KindWeights, ts); err != nil {
					return err
				}
			}
			got, err := c.exchange(ctx, env, wire.KindGradient)
			if err != nil {
				return err
			}
			for s := range outs {
				if outs[s], err = decodeGradient(setup, kind, s, got[s][wire.KindGradient], ins[s].Round); err != nil {
					return fmt.Errorf("site %s: %w", c.cfg.Sites[s], err)
				}
			}
			if _, err := co.Update(outs); err != nil {
				return err
			}
			c.cfg.Metrics.round(time.Since(start))
			c.log.Debug("round", slog.String(wire.LogKeyModel, kind.String()), slog.Int(wire.LogKeyRound, co.Round()), slog.Float64("loss", co.Loss()))
			if co.Round()%c.cfg.CheckpointEvery == 0 && !co.Done() {
				c.st.Step, c.st.Checkpoint = c.step, co.Checkpoint()
				if err := c.save(ctx); err != nil {
					return err
				}
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
		c.log.Info("model trained", slog.String(wire.LogKeyModel, kind.String()), slog.Int("rounds", co.Round()), slog.Float64("loss", co.Loss()))
	}
	return nil
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

// decodeGradient reads a site's gradient envelope.
func decodeGradient(setup *estimator.Setup, kind estimator.Kind, site int, e *wire.Envelope, round int) (*estimator.SiteOutput, error) {
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
	return &estimator.SiteOutput{Model: kind, Round: round, Site: site, Rows: rows, Loss: loss, Grads: g, Shared: sh}, nil
}

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
