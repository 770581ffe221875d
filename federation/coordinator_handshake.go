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
	rows := make([]int, m)
	var ref wire.DigestList
	var fp []wire.Digest
	hashes := make([][]wire.Digest, m)
	for s, name := range c.cfg.Sites {
		h := got[s][wire.KindHello]
		hello, err := decodeHello(h)
		schema, cols, mo, omega := hello.schema, hello.cols, hello.mo, hello.omega
		if err != nil {
			return &SitesError{Sites: []string{name}, Err: fmt.Errorf("site %s: %w", name, err)}
		}
		if s == 0 {
			c.st.Schema, ref, fp = schema, cols, omega
		} else if col := schemaDiff(c.st.Schema, ref, schema, cols); col >= 0 {
			c.refuse(ctx, name, wire.Scalar(tRefusedColumn, float64(col)))
			return &SitesError{Sites: []string{name}, Err: fmt.Errorf("%w: site %s: covariate %d (0-based) differs from site %s's (the site's log names the column)", ErrSchema, name, col, c.cfg.Sites[0])}
		}
		// A site that does not hold the share out would train on rows the
		// choice is made on.
		if share, err := scalar(h, tSelectShare); c.st.Select.On() && (err != nil || share != c.st.Select.Share) {
			return &SitesError{Sites: []string{name}, Err: fmt.Errorf("%w: site %s does not hold out rows for model selection (an older crffd?)", ErrProtocol, name)}
		}
		moments[s], rows[s] = mo, hello.rows
		if p, err := scalar(h, tPrivate); err == nil && p != 0 {
			c.st.Private++
		}
		d := got[s][wire.KindDedupHashes]
		if on, _ := scalar(d, tDedupOn); on != 0 {
			l, ok := d.DigestList(dDedup)
			if !ok || len(l.Digests) != hello.rows {
				return fmt.Errorf("%w: site %s: dedup-hashes must hold one HMAC per row", ErrProtocol, name)
			}
			hashes[s] = l.Digests
		} else {
			c.log.Info("site sends no identity hashes; its rows are not de-duplicated", slog.String(LogKeySite, name))
		}
		if len(omega) != 1+len(c.cfg.Extra) {
			return &SitesError{Sites: []string{name}, Err: fmt.Errorf("%w: site %s sent the fingerprints of %d kernels, the run's %d (an older crffd?)",
				ErrProtocol, name, len(omega), 1+len(c.cfg.Extra))}
		}
		if !slices.Equal(omega, fp) {
			c.refuse(ctx, name, wire.Scalar(tRefusedKernel, 1))
			return &SitesError{Sites: []string{name}, Err: fmt.Errorf("%w: site %s", ErrFrequencies, name)}
		}
	}
	c.st.Balance = c.poolBalance(got, len(c.st.Schema.Binary))
	scaler, err := estimator.NewScaler(c.st.Schema, moments)
	if err != nil {
		return err
	}
	c.st.Scaler = scaler
	if c.setups, err = setupsFor(ctx, c.st.Schema, c.spectra(), c.st.Config, c.points(), scaler); err != nil {
		return err
	}
	if !slices.Equal(digests(c.setups), fp) {
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
		c.st.Rows[s] = rows[s] - len(drop[s])
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
// it carries the count (the site's hello.rows, before de-duplication), which
// the site checks against the rows it has now.
func (c *coordinator) helloFor(s int) (*wire.Envelope, error) {
	ts := append(configTensors(c.st.Config), wire.Scalar(tSiteIndex, float64(s)), wire.Scalar(tSiteCount, float64(len(c.cfg.Sites))),
		wire.Scalar(tSelectShare, c.st.Select.Share))
	ts = append(ts, kernelTensors(c.cfg.KernelName, c.st.Kernels)...)
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

// siteHello is what a site's hello tells the coordinator.
type siteHello struct {
	schema estimator.Schema
	cols   wire.DigestList // a digest per covariate
	// rows is the site's row count before de-duplication and holdout, and
	// mo the moments of the rows it did not hold out.
	rows  int
	mo    estimator.Moments
	omega []wire.Digest // the kernels' frequency fingerprints
}

// decodeHello reads a site's hello.
func decodeHello(e *wire.Envelope) (siteHello, error) {
	var h siteHello
	bin, err := vector(e, tSchemaBinary, -1)
	if err != nil {
		return h, err
	}
	bo, err := scalar(e, tSchemaBinOut)
	if err != nil {
		return h, err
	}
	// The covariates size the base frequencies the coordinator draws.
	if len(bin) > MaxCovariates {
		return h, fmt.Errorf("%w: hello of %d covariates, more than the protocol's %d", ErrProtocol, len(bin), MaxCovariates)
	}
	h.schema.Binary = make([]bool, len(bin))
	for j, v := range bin {
		h.schema.Binary[j] = v != 0
	}
	h.schema.BinaryOutcome = bo != 0
	var ok bool
	h.cols, ok = e.DigestList(dSchemaColumns)
	if !ok || len(h.cols.Digests) != len(bin) {
		return h, fmt.Errorf("%w: hello lacks one column digest per covariate", ErrProtocol)
	}
	if h.rows, err = integer(e, tHelloRows); err != nil {
		return h, err
	}
	mo := &h.mo
	if mo.N, err = integer(e, tMomentsN); err != nil {
		return h, err
	}
	if mo.N > h.rows {
		return h, fmt.Errorf("%w: hello has the moments of %d rows of %d", ErrProtocol, mo.N, h.rows)
	}
	sum, err := vector(e, tMomentsSum, len(bin)+1)
	if err != nil {
		return h, err
	}
	sq, err := vector(e, tMomentsSumSq, len(bin)+1)
	if err != nil {
		return h, err
	}
	mo.Sum, mo.SumSq = slices.Clone(sum), slices.Clone(sq)
	lg, err := vector(e, tMomentsLog, 3)
	if err != nil {
		return h, err
	}
	if p := lg[0]; p < 0 || p != math.Trunc(p) || p > float64(mo.N) {
		return h, fmt.Errorf("%w: hello counts %v positive outcomes of %d rows", ErrProtocol, p, mo.N)
	}
	mo.Positive, mo.LogSum, mo.LogSumSq = int(lg[0]), lg[1], lg[2]
	om, ok := e.DigestList(dOmega0)
	if !ok || len(om.Digests) == 0 {
		return h, fmt.Errorf("%w: hello lacks the frequency fingerprint", ErrProtocol)
	}
	h.omega = om.Digests
	return h, nil
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
