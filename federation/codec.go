package federation

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/inference"
)

// Sentinel errors of the protocol.
var (
	// ErrProtocol reports an envelope that lacks a tensor the protocol
	// requires or carries one of the wrong shape.
	ErrProtocol = errors.New("federation protocol violation")
	// ErrSchema reports a site whose schema differs from the federation's.
	ErrSchema = errors.New("schema differs from the federation's")
	// ErrFrequencies reports a site whose kernel does not reproduce the
	// coordinator's base frequencies.
	ErrFrequencies = errors.New("kernel frequencies differ from the coordinator's")
	// ErrSilent reports a site that did not answer within the round timeout
	// after every retry.
	ErrSilent = errors.New("site silent")
	// ErrRefused reports that the coordinator refused this site or aborted
	// the run.
	ErrRefused = errors.New("refused by the coordinator")
	// ErrCheckpointSites: the coordinator's checkpoint is of a run of other
	// sites than its configuration lists, so it can neither resume it nor
	// drop it without the operator's say.
	ErrCheckpointSites = errors.New("the checkpoint's sites differ from the configuration's")
	// ErrCheckpointKernels: the coordinator's checkpoint is of a run that
	// chooses among other kernels than its configuration lists.
	ErrCheckpointKernels = errors.New("the checkpoint's kernels differ from the configuration's")
	// ErrCheckpointSubgroups: the coordinator's checkpoint is of a run
	// that asked about other subgroups (coordinator.subgroups) than its
	// configuration does; the sums it holds would be pooled under the
	// wrong names.
	ErrCheckpointSubgroups = errors.New("the checkpoint's subgroups differ from the configuration's")
	// ErrTransportClosed: the transport stopped delivering envelopes (its
	// plugin ended).
	ErrTransportClosed = errors.New("federation: transport closed")
	// ErrTooFewRows reports a site whose rows, in one treatment arm, are
	// fewer than SiteConfig.MinArmRows: its sums and gradients would come
	// too close to single records for it to take part.
	ErrTooFewRows = errors.New("too few rows to take part")
	// ErrRowsChanged reports a site restarted mid-run whose rows are not
	// those it began the run with: the run's de-duplication verdict and
	// pooled standardisation were computed from the rows it had then, so
	// it cannot go on with the ones it has now.
	ErrRowsChanged = errors.New("rows changed since the run began")
	// ErrTooFewChanged reports a site whose rows differ from those of an
	// earlier run it took part in by at least one row and fewer than
	// min_arm_rows: the difference of the two runs' sums would come that
	// close to single records. A SiteConfig.Join error that wraps it
	// refuses the run for that reason (crffd site wraps store's
	// RowChangeError so, since store does not import federation).
	ErrTooFewChanged = errors.New("rows differ too little from an earlier run")
	// ErrSiteRefused reports, at the coordinator, that a site refused to
	// take part in the run (ErrTooFewRows, ErrTooFewChanged or
	// ErrRowsChanged at the site). The error names the site and its reason:
	// "site2 refused the run: ...".
	ErrSiteRefused = errors.New("refused the run")
)

// refusal is why a site refuses a run, as it tells the coordinator in the
// tRefusalReason scalar of its done. The code is the whole message: it says
// which rule the site's rows break, never by how much, so that the refusal
// tells the coordinator nothing it could not learn from the site's silence.
type refusal int

// The reasons a site refuses a run. Their values are part of the protocol.
const (
	refusalUnknown       refusal = 0 // not a refusal, or no reason given
	refusalTooFewRows    refusal = 1 // ErrTooFewRows, before or after de-duplication
	refusalTooFewChanged refusal = 2 // ErrTooFewChanged, from SiteConfig.Join
	refusalRowsChanged   refusal = 3 // ErrRowsChanged, on rejoining (a row count, or SiteConfig.Join)
	refusalLimit         refusal = 4 // ErrLimit: the run asks for more than the site's Limits allow
	refusalBudget        refusal = 5 // ErrBudget: the run would overspend the site's privacy budget
	refusalKernel        refusal = 6 // ErrNoKernel: the site cannot train a kernel the run chooses among
)

// refusalOf returns the reason for which err refuses the run, or
// refusalUnknown when err is a failure of another kind: those stop the
// site without a word, as before, since a restarted site may answer the
// step again.
func refusalOf(err error) refusal {
	switch {
	case errors.Is(err, ErrTooFewRows):
		return refusalTooFewRows
	case errors.Is(err, ErrTooFewChanged):
		return refusalTooFewChanged
	case errors.Is(err, ErrRowsChanged):
		return refusalRowsChanged
	case errors.Is(err, ErrLimit):
		return refusalLimit
	case errors.Is(err, ErrBudget):
		return refusalBudget
	case errors.Is(err, ErrNoKernel):
		return refusalKernel
	}
	return refusalUnknown
}

// String says the reason as the coordinator's error gives it.
func (r refusal) String() string {
	switch r {
	case refusalTooFewRows:
		return "it has too few rows in a treatment arm, in its table or after de-duplication (federation.min_arm_rows)"
	case refusalTooFewChanged:
		return "its rows differ too little from an earlier run's (federation.min_arm_rows)"
	case refusalRowsChanged:
		return "its rows changed since the run began (it rejoined after a restart with other rows)"
	case refusalLimit:
		return "the run asks for more than the site's limits allow (limits.*; the site's log names the setting)"
	case refusalBudget:
		return "the run would spend more than the site's privacy budget has left (privacy.*; see the site's crff_privacy)"
	case refusalKernel:
		return "it cannot train a kernel the run chooses among: it has no plugin of it, or does not train further kernels (kernel.name auto at the site; its log names the kernel)"
	}
	// A newer site's reason, or none.
	return fmt.Sprintf("for a reason this coordinator does not know (code %d)", int(r))
}

// MaxCovariates is the most covariates a run may have: a coordinator
// refuses a site's hello with more, before it allocates anything for them
// (it draws base frequencies for every covariate). It is twice the columns
// SQLite allows a site's table by default.
const MaxCovariates = 4096

// Tensor and digest-list names. They are part of the protocol.
const (
	tSiteIndex     = "site.index"
	tPeerPrefix    = "peer." // hello: one scalar per site, "peer.<name>" = its index
	tSiteCount     = "site.count"
	tSiteRows      = "site.rows" // hello to a rejoining site: its row count when the run began
	tSchemaBinary  = "schema.binary"
	tSchemaBinOut  = "schema.binary_outcome"
	tHelloRows     = "hello.rows" // the site's row count, before de-duplication and holdout
	tMomentsN      = "moments.n"
	tMomentsSum    = "moments.sum"
	tMomentsSumSq  = "moments.sumsq"
	tMomentsLog    = "moments.log" // rows with y > 0, Σ log y, Σ (log y)²; zeros unless every y > 0 (logMoments)
	dSchemaColumns = "schema.columns"
	dOmega0        = "kernel.omega0"
	dDedup         = "dedup.hmac"
	tDedupOn       = "dedup.enabled"
	tDedupDrop     = "dedup.drop"
	tScalerMean    = "scaler.mean"
	tScalerScale   = "scaler.scale"
	tScalerY       = "scaler.y"    // [mean, sd]
	tScalerLogY    = "scaler.logy" // [mean, sd, valid, preferred] of log y
	tRound         = "round"
	tNoise         = "noise"
	pWeights       = "W."
	pGrads         = "G."
	pShared        = "shared."
	tLoss          = "loss"
	tRows          = "rows"
	tLambda        = "lambda"
	tRounds        = "rounds"
	tATE           = "ate"          // ate, global-ate: the plug-in ATE (mean CATE)
	tN             = "n"            // ate, global-ate: rows behind the ATEs
	tAIPWSum       = "aipw.sum"     // ate: Σψ, the site's AIPW scores
	tAIPWSumSq     = "aipw.sumsq"   // ate: Σψ²
	tClipped       = "aipw.clipped" // ate, global-ate: rows whose propensity was clipped
	tAIPWATE       = "aipw.ate"     // global-ate: the AIPW estimate
	tAIPWSE        = "aipw.se"      // global-ate: its standard error
	tAIPWLower     = "aipw.lower"   // global-ate: its 95% interval
	tAIPWUpper     = "aipw.upper"
	tRejoin        = "rejoin"         // hello: a restarted site asks to rejoin the run; the value tells its processes apart
	tStatus        = "status"         // done: 1 finished, -1 aborted (from a site: refused)
	tRefusalReason = "refusal.reason" // done from a site: why it refuses the run (refusal)
	tRefusedColumn = "refused.column" // done: the covariate that differs
	tRefusedKernel = "refused.kernel" // done: 1 when the frequencies differ
)

// configField is one estimator.Config field as a named scalar.
type configField struct {
	name  string
	count bool // an int setting: a whole number in [0, 2³²)
	get   func(*estimator.Config) float64
	set   func(*estimator.Config, float64)
}

// configFields lists what the coordinator sends of its configuration.
// The seed travels as two 32-bit halves, which float64 holds exactly.
var configFields = []configField{
	{"config.features", true, func(c *estimator.Config) float64 { return float64(c.Features) }, func(c *estimator.Config, v float64) { c.Features = int(v) }},
	{"config.latent", true, func(c *estimator.Config) float64 { return float64(c.Latent) }, func(c *estimator.Config, v float64) { c.Latent = int(v) }},
	{"config.draws", true, func(c *estimator.Config) float64 { return float64(c.Draws) }, func(c *estimator.Config, v float64) { c.Draws = int(v) }},
	{"config.zeta_propensity", false, func(c *estimator.Config) float64 { return c.ZetaPropensity }, func(c *estimator.Config, v float64) { c.ZetaPropensity = v }},
	{"config.zeta_outcome", false, func(c *estimator.Config) float64 { return c.ZetaOutcome }, func(c *estimator.Config, v float64) { c.ZetaOutcome = v }},
	{"config.zeta_latent", false, func(c *estimator.Config) float64 { return c.ZetaLatent }, func(c *estimator.Config, v float64) { c.ZetaLatent = v }},
	{"config.zeta_t", false, func(c *estimator.Config) float64 { return c.ZetaT }, func(c *estimator.Config, v float64) { c.ZetaT = v }},
	{"config.init_log_scale", false, func(c *estimator.Config) float64 { return c.InitLogScale }, func(c *estimator.Config, v float64) { c.InitLogScale = v }},
	{"config.init_log_sd", false, func(c *estimator.Config) float64 { return c.InitLogSD }, func(c *estimator.Config, v float64) { c.InitLogSD = v }},
	{"config.transfer", true, func(c *estimator.Config) float64 { return float64(c.Transfer) }, func(c *estimator.Config, v float64) { c.Transfer = estimator.Transfer(v) }},
	{"config.transfer_prior", false, func(c *estimator.Config) float64 { return c.TransferPrior }, func(c *estimator.Config, v float64) { c.TransferPrior = v }},
	{"config.method", true, func(c *estimator.Config) float64 { return float64(c.Method) }, func(c *estimator.Config, v float64) { c.Method = estimator.Method(v) }},
	{"config.rounds", true, func(c *estimator.Config) float64 { return float64(c.Rounds) }, func(c *estimator.Config, v float64) { c.Rounds = int(v) }},
	{"config.learning_rate", false, func(c *estimator.Config) float64 { return c.LearningRate }, func(c *estimator.Config, v float64) { c.LearningRate = v }},
	{"config.store", true, func(c *estimator.Config) float64 { return float64(c.Store) }, func(c *estimator.Config, v float64) { c.Store = int(v) }},
	{"config.tolerance", false, func(c *estimator.Config) float64 { return c.Tolerance }, func(c *estimator.Config, v float64) { c.Tolerance = v }},
	{"config.seed_hi", true, func(c *estimator.Config) float64 { return float64(c.Seed >> 32) }, func(c *estimator.Config, v float64) { c.Seed = c.Seed&0xffffffff | uint64(v)<<32 }},
	{"config.seed_lo", true, func(c *estimator.Config) float64 { return float64(c.Seed & 0xffffffff) }, func(c *estimator.Config, v float64) { c.Seed = c.Seed&^0xffffffff | uint64(v) }},
	{"config.samples", true, func(c *estimator.Config) float64 { return float64(c.Samples) }, func(c *estimator.Config, v float64) { c.Samples = int(v) }},
	{"config.folds", true, func(c *estimator.Config) float64 { return float64(c.Folds) }, func(c *estimator.Config, v float64) { c.Folds = int(v) }},
	{"config.mh_steps", true, func(c *estimator.Config) float64 { return float64(c.MHSteps) }, func(c *estimator.Config, v float64) { c.MHSteps = int(v) }},
	{"config.standardize_y", false, func(c *estimator.Config) float64 { return b2f(c.StandardizeY) }, func(c *estimator.Config, v float64) { c.StandardizeY = v != 0 }},
	{"config.linear", false, func(c *estimator.Config) float64 { return c.Linear }, func(c *estimator.Config, v float64) { c.Linear = v }},
	{"config.log_outcome", true, func(c *estimator.Config) float64 { return float64(c.LogOutcome) }, func(c *estimator.Config, v float64) { c.LogOutcome = estimator.LogOutcome(v) }},
	{"config.batch_size", true, func(c *estimator.Config) float64 { return float64(c.BatchSize) }, func(c *estimator.Config, v float64) { c.BatchSize = int(v) }},
	{"config.epochs", false, func(c *estimator.Config) float64 { return c.Epochs }, func(c *estimator.Config, v float64) { c.Epochs = v }},
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// configTensors encodes cfg as named scalars.
func configTensors(cfg estimator.Config) []wire.Tensor {
	out := make([]wire.Tensor, len(configFields))
	for i, f := range configFields {
		out[i] = wire.Scalar(f.name, f.get(&cfg))
	}
	return out
}

// decodeConfig rebuilds a configuration from configTensors. Fields the
// coordinator does not send keep their defaults.
func decodeConfig(e *wire.Envelope) (estimator.Config, error) {
	cfg := estimator.DefaultConfig()
	cfg.Workers = 1
	for _, f := range configFields {
		v, err := scalar(e, f.name)
		if err != nil {
			return cfg, err
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return cfg, fmt.Errorf("%w: %s tensor %q is %v", ErrProtocol, e.Kind, f.name, v)
		}
		// Counts and codes become ints: a value that is not a whole
		// number in range would wrap or truncate into another setting
		// than the one the coordinator sent.
		if f.count && (v < 0 || v != math.Trunc(v) || v > math.MaxInt32*2+1) {
			return cfg, fmt.Errorf("%w: %s tensor %q is %v, not a count", ErrProtocol, e.Kind, f.name, v)
		}
		f.set(&cfg, v)
	}
	return cfg, nil
}

// scalar reads the scalar tensor name of e.
func scalar(e *wire.Envelope, name string) (float64, error) {
	t, ok := e.Tensor(name)
	if !ok {
		return 0, fmt.Errorf("%w: %s lacks tensor %q", ErrProtocol, e.Kind, name)
	}
	v, err := t.Scalar()
	if err != nil {
		return 0, fmt.Errorf("%w: %s tensor %q: %w", ErrProtocol, e.Kind, name, err)
	}
	return v, nil
}

// vector reads the tensor name of e as a vector (any rank, row-major).
func vector(e *wire.Envelope, name string, n int) ([]float64, error) {
	t, ok := e.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("%w: %s lacks tensor %q", ErrProtocol, e.Kind, name)
	}
	if n >= 0 && len(t.Values) != n {
		return nil, fmt.Errorf("%w: %s tensor %q has %d values, want %d", ErrProtocol, e.Kind, name, len(t.Values), n)
	}
	return t.Values, nil
}

// integer reads a scalar that must be a non-negative integer.
func integer(e *wire.Envelope, name string) (int, error) {
	v, err := scalar(e, name)
	if err != nil {
		return 0, err
	}
	if v < 0 || v != math.Trunc(v) || v > 1<<52 {
		return 0, fmt.Errorf("%w: %s tensor %q is not a count", ErrProtocol, e.Kind, name)
	}
	return int(v), nil
}

// matrices collects the matrix tensors of e whose names start with prefix,
// by name without the prefix. The matrices share the envelope's values.
func matrices(e *wire.Envelope, prefix string) (map[string]*mat.Dense, error) {
	out := map[string]*mat.Dense{}
	for _, t := range e.Tensors() {
		name, ok := strings.CutPrefix(t.Name, prefix)
		if !ok || len(t.Shape) != 2 {
			continue
		}
		d, err := t.Dense()
		if err != nil {
			return nil, fmt.Errorf("%w: %s tensor %q: %w", ErrProtocol, e.Kind, t.Name, err)
		}
		out[name] = d
	}
	return out, nil
}

// vectors collects the vector tensors of e whose names start with prefix.
func vectors(e *wire.Envelope, prefix string) map[string][]float64 {
	out := map[string][]float64{}
	for _, t := range e.Tensors() {
		if name, ok := strings.CutPrefix(t.Name, prefix); ok && len(t.Shape) == 1 {
			out[name] = t.Values
		}
	}
	return out
}

// checkBlocks reports whether m holds exactly the blocks of kind under setup,
// with their shapes.
func checkBlocks(setup *estimator.Setup, kind estimator.Kind, m map[string]*mat.Dense, shared map[string][]float64) error {
	blocks := setup.Blocks(kind)
	if len(m) != len(blocks) {
		return fmt.Errorf("%w: %s: %d weight blocks, want %d", ErrProtocol, kind, len(m), len(blocks))
	}
	for _, b := range blocks {
		d, ok := m[b.Name]
		if !ok {
			return fmt.Errorf("%w: %s: block %q missing", ErrProtocol, kind, b.Name)
		}
		if r, c := d.Dims(); r != b.Rows || c != b.Cols {
			return fmt.Errorf("%w: %s: block %q is %d×%d, want %d×%d", ErrProtocol, kind, b.Name, r, c, b.Rows, b.Cols)
		}
	}
	params := setup.SharedParams(kind)
	if len(shared) != len(params) {
		return fmt.Errorf("%w: %s: %d shared parameters, want %d", ErrProtocol, kind, len(shared), len(params))
	}
	for _, p := range params {
		if len(shared[p.Name]) != p.Size {
			return fmt.Errorf("%w: %s: shared parameter %q has %d values, want %d", ErrProtocol, kind, p.Name, len(shared[p.Name]), p.Size)
		}
	}
	return nil
}

// parseKind returns the model named s.
func parseKind(s string) (estimator.Kind, error) {
	for _, k := range estimator.Kinds {
		if k.String() == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown model %q", ErrProtocol, s)
}

// scalerTensors encodes the pooled standardisation.
func scalerTensors(s estimator.Scaler) []wire.Tensor {
	return []wire.Tensor{
		wire.Vector(tScalerMean, s.Mean),
		wire.Vector(tScalerScale, s.Scale),
		wire.Vector(tScalerY, []float64{s.YMean, s.YSD}),
		wire.Vector(tScalerLogY, []float64{s.LogYMean, s.LogYSD, b2f(s.LogYValid), b2f(s.LogYPreferred)}),
	}
}

// decodeScaler reads scalerTensors for dx covariates.
func decodeScaler(e *wire.Envelope, dx int) (estimator.Scaler, error) {
	var s estimator.Scaler
	mean, err := vector(e, tScalerMean, dx)
	if err != nil {
		return s, err
	}
	scale, err := vector(e, tScalerScale, dx)
	if err != nil {
		return s, err
	}
	y, err := vector(e, tScalerY, 2)
	if err != nil {
		return s, err
	}
	s.Mean = append([]float64(nil), mean...)
	s.Scale = append([]float64(nil), scale...)
	s.YMean, s.YSD = y[0], y[1]
	ly, err := vector(e, tScalerLogY, 4)
	if err != nil {
		return s, err
	}
	s.LogYMean, s.LogYSD, s.LogYValid, s.LogYPreferred = ly[0], ly[1], ly[2] != 0, ly[3] != 0
	return s, nil
}

// columnDigests fingerprints a schema: per covariate, a hash of its name
// and whether it is binary. Equal digests mean the same column. With the
// sites' secret as key the hash is HMAC-SHA256, which a coordinator
// without the secret cannot test name guesses against; without one it is
// SHA-256, which a dictionary of column names reverses.
func columnDigests(key []byte, names []string, schema estimator.Schema) wire.DigestList {
	l := wire.DigestList{Name: dSchemaColumns, Digests: make([]wire.Digest, len(schema.Binary))}
	for j, bin := range schema.Binary {
		name := ""
		if j < len(names) {
			name = names[j]
		}
		msg := fmt.Appendf(nil, "crffd/column\x00%s\x00binary=%t", name, bin)
		if len(key) == 0 {
			l.Digests[j] = sha256.Sum256(msg)
			continue
		}
		m := hmac.New(sha256.New, key)
		m.Write(msg)
		copy(l.Digests[j][:], m.Sum(nil))
	}
	return l
}

// frequencyDigest is the SHA-256 of the base frequencies of every feature
// map of setup, bit for bit.
func frequencyDigest(setup *estimator.Setup) wire.Digest {
	h := sha256.New()
	var b [8]byte
	for _, m := range setup.Maps {
		r, c := m.Omega0.Dims()
		binary.BigEndian.PutUint64(b[:], uint64(r))
		h.Write(b[:])
		binary.BigEndian.PutUint64(b[:], uint64(c))
		h.Write(b[:])
		for i := range r {
			for j := range c {
				binary.BigEndian.PutUint64(b[:], math.Float64bits(m.Omega0.At(i, j)))
				h.Write(b[:])
			}
		}
	}
	var d wire.Digest
	h.Sum(d[:0])
	return d
}

// ints converts positions to float64 values.
func ints(v []int) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// globalTensors encodes the global ATEs of a run for the global-ate
// envelope.
func globalTensors(g inference.ATEs) []wire.Tensor {
	return []wire.Tensor{
		wire.Scalar(tATE, g.PlugIn.Estimate), wire.Scalar(tN, float64(g.PlugIn.N)),
		wire.Scalar(tAIPWATE, g.AIPW.Estimate), wire.Scalar(tAIPWSE, g.AIPW.SE),
		wire.Scalar(tAIPWLower, g.AIPW.Lower), wire.Scalar(tAIPWUpper, g.AIPW.Upper),
		wire.Scalar(tClipped, float64(g.Clipped)), wire.Scalar(tAIPWNoiseSE, g.AIPW.NoiseSE),
	}
}

// decodeGlobal reads the global ATEs of a global-ate envelope.
func decodeGlobal(e *wire.Envelope) (inference.ATEs, error) {
	var g inference.ATEs
	n, err := integer(e, tN)
	if err != nil {
		return g, err
	}
	g.PlugIn = inference.PointEstimate(0, n)
	g.AIPW.N = n
	for _, f := range []struct {
		name string
		dst  *float64
	}{
		{tATE, &g.PlugIn.Estimate}, {tAIPWATE, &g.AIPW.Estimate}, {tAIPWSE, &g.AIPW.SE},
		{tAIPWLower, &g.AIPW.Lower}, {tAIPWUpper, &g.AIPW.Upper},
	} {
		if *f.dst, err = scalar(e, f.name); err != nil {
			return g, err
		}
	}
	if g.Clipped, err = integer(e, tClipped); err != nil {
		return g, err
	}
	// A coordinator that predates noised sums sends no noise_se.
	if _, ok := e.Tensor(tAIPWNoiseSE); ok {
		if g.AIPW.NoiseSE, err = scalar(e, tAIPWNoiseSE); err != nil {
			return g, err
		}
		if g.AIPW.NoiseSE < 0 || g.AIPW.NoiseSE > g.AIPW.SE*(1+1e-9) {
			return g, fmt.Errorf("%w: %s: noise se %v of an se of %v", ErrProtocol, e.Kind, g.AIPW.NoiseSE, g.AIPW.SE)
		}
	}
	return g, nil
}

// decodeLocal reads a site's ate envelope: its plug-in ATE, the Sums of its
// AIPW scores and the rows whose propensity it clipped. The sums of a
// private site carry noise, whose standard deviations it sends
// (tATENoise): that on Σψ becomes Sums.NoiseVar.
func decodeLocal(e *wire.Envelope) (plugin float64, sums inference.Sums, clipped int, err error) {
	if plugin, err = scalar(e, tATE); err != nil {
		return
	}
	if sums.N, err = integer(e, tN); err != nil {
		return
	}
	if sums.Sum, err = scalar(e, tAIPWSum); err != nil {
		return
	}
	if sums.SumSq, err = scalar(e, tAIPWSumSq); err != nil {
		return
	}
	if clipped, err = integer(e, tClipped); err != nil {
		return
	}
	if _, ok := e.Tensor(tATENoise); ok {
		var sd []float64
		if sd, err = vector(e, tATENoise, 3); err != nil {
			return
		}
		for _, v := range sd {
			if v < 0 {
				err = fmt.Errorf("%w: %s: noise standard deviation %v", ErrProtocol, e.Kind, v)
				return
			}
		}
		sums.NoiseVar = sd[0] * sd[0]
	}
	switch {
	case clipped < 0 || clipped > sums.N:
		err = fmt.Errorf("%w: %s: %d clipped rows of %d", ErrProtocol, e.Kind, clipped, sums.N)
	case sums.N > 0 && sums.SumSq < sums.Sum*sums.Sum/float64(sums.N)*(1-1e-9):
		// Σψ² ≥ (Σψ)²/n for any scores: sums that break it would make the
		// global standard error too small. (Non-finite values never get
		// this far: package wire refuses them.)
		err = fmt.Errorf("%w: %s: AIPW sums with Σψ² < (Σψ)²/n", ErrProtocol, e.Kind)
	}
	return
}
