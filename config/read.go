package config

import (
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cast"
	"github.com/spf13/viper"

	"github.com/crffd/crffd/certs"
	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/plugins/host"
	"github.com/crffd/crffd/plugins/transport"
	"github.com/crffd/crffd/store"
)

// Reader reads typed settings from a layered viper (NewViper, with the
// configuration file and flags added by the command).
type Reader struct {
	// V holds the settings.
	V *viper.Viper
	// File is the configuration file's path, against which relative paths
	// in the configuration are resolved; empty for none.
	File string
}

// Resolve makes a relative path relative to the configuration file.
func (r Reader) Resolve(path string) string {
	if path == "" || filepath.IsAbs(path) || r.File == "" {
		return path
	}
	return filepath.Join(filepath.Dir(r.File), path)
}

// StringList reads a list key: a YAML list, or from the environment a
// string of names separated by commas or spaces (CRFFD_SITE_COVARIATES=
// "age,score").
// An empty list is nil.
func (r Reader) StringList(key string) []string {
	var out []string
	if v, ok := r.V.Get(key).(string); ok {
		out = strings.FieldsFunc(v, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	} else {
		out = r.V.GetStringSlice(key)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// StringMap returns the map-valued key: the entries of the file (or a
// flag), with the entries the environment sets (EnvMap) added or
// replacing them. It is the one reader of map-valued keys. A list value
// of the file (privacy.bounds: {age: [18, 100]}) reads as its entries
// joined by commas, as the environment gives it ("18,100").
func (r Reader) StringMap(key string) map[string]string {
	m := map[string]string{}
	for k, v := range r.V.GetStringMap(key) {
		if l, ok := v.([]any); ok {
			parts := make([]string, len(l))
			for i, e := range l {
				parts[i] = cast.ToString(e)
			}
			m[k] = strings.Join(parts, ",")
			continue
		}
		m[k] = cast.ToString(v)
	}
	maps.Copy(m, EnvMap(key))
	return m
}

// PositiveDuration reads a positive duration key.
func (r Reader) PositiveDuration(key string) (time.Duration, error) {
	d, err := r.Duration(key)
	if err == nil && d <= 0 {
		err = fmt.Errorf("%s %q: want a positive duration such as 5s", key, r.V.GetString(key))
	}
	return d, err
}

// Duration reads key as a duration ≥ 0, refusing text that is not one
// ("10 seconds"), which viper would read as 0.
func (r Reader) Duration(key string) (time.Duration, error) {
	d, err := cast.ToDurationE(r.V.Get(key))
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s %q: want a duration ≥ 0 such as 5s", key, r.V.GetString(key))
	}
	return d, nil
}

// Pin returns the configured SHA-256 pin of a plugin file, or "".
func (r Reader) Pin(kind, name string) string {
	file := host.FileName(kind, name)
	if p := os.Getenv(EnvName("plugin_sha256." + file)); p != "" {
		return p
	}
	return r.V.GetStringMapString("plugin_sha256")[strings.ToLower(file)]
}

// SiteSource returns the configured records source, with the database
// path resolved against the configuration file's folder.
//
// Each key is read on its own, so that the environment (CRFFD_SITE_TABLE)
// and the defaults of SiteSettings apply to it as to every other key:
// unmarshalling the site section as a whole would see the file alone.
func (r Reader) SiteSource() (store.Source, error) {
	src := store.Source{
		DB:              r.V.GetString("site.db"),
		Table:           r.V.GetString("site.table"),
		IDColumn:        r.V.GetString("site.id_column"),
		TreatmentColumn: r.V.GetString("site.treatment_column"),
		OutcomeColumn:   r.V.GetString("site.outcome_column"),
		Covariates:      r.StringList("site.covariates"),
		Binary:          r.StringList("site.binary"),
		Continuous:      r.StringList("site.continuous"),
		OutcomeType:     store.OutcomeType(r.V.GetString("site.outcome_type")),
		IdentityColumns: r.StringList("site.identity_columns"),
		OnInvalid:       store.OnInvalid(r.V.GetString("site.on_invalid")),
	}
	if src.DB == "" {
		return src, fmt.Errorf("site configuration: site.db is not set (the site's SQLite file)")
	}
	src.DB = r.Resolve(src.DB)
	return src, src.Validate()
}

// Model returns the estimator configuration from the model.* keys.
func (r Reader) Model() (estimator.Config, error) {
	v := r.V
	c := estimator.DefaultConfig()
	c.Features = v.GetInt("model.features")
	c.Latent = v.GetInt("model.latent")
	c.Rounds = v.GetInt("model.rounds")
	c.LearningRate = v.GetFloat64("model.learning_rate")
	c.BatchSize = v.GetInt("model.batch_size")
	c.Epochs = v.GetFloat64("model.epochs")
	if !(c.Epochs >= 0) || math.IsInf(c.Epochs, 1) {
		return c, fmt.Errorf("model.epochs %v: want a finite, non-negative number of passes", c.Epochs)
	}
	if c.BatchSize < 0 {
		return c, fmt.Errorf("model.batch_size %d: want 0 (every row) or a positive row count", c.BatchSize)
	}
	c.Samples = v.GetInt("model.samples")
	c.MHSteps = v.GetInt("model.mh_steps")
	c.Folds = v.GetInt("model.folds")
	if err := CheckFolds(c.Folds); err != nil {
		return c, fmt.Errorf("model.folds: %w", err)
	}
	c.Seed = v.GetUint64("model.seed")
	c.TransferPrior = v.GetFloat64("model.transfer_prior")
	switch m := v.GetString("model.optimizer"); m {
	case "lbfgs":
		c.Method = estimator.LBFGS
	case "adam":
		c.Method = estimator.Adam
	default:
		return c, fmt.Errorf("model.optimizer %q: want lbfgs or adam", m)
	}
	t, err := estimator.ParseTransfer(v.GetString("model.transfer"))
	if err != nil {
		return c, fmt.Errorf("model.transfer: %w", err)
	}
	c.Transfer = t
	return c, nil
}

// CheckFolds refuses a number of cross-fitting folds that the estimator
// would refuse, before any work: 0 (the default) or at least 2.
func CheckFolds(k int) error {
	if k < 0 || k == 1 {
		return fmt.Errorf("%d folds: want 0 (the default, %d) or at least 2", k, estimator.DefaultFolds)
	}
	return nil
}

// Kernel returns the configured kernel: kernel.params from the file,
// with CRFFD_KERNEL_PARAMS_<NAME> variables adding or replacing entries.
func (r Reader) Kernel() (modelstore.Kernel, error) {
	k := modelstore.Kernel{Name: r.V.GetString("kernel.name"), Params: map[string]float64{}}
	env := EnvMap("kernel.params")
	for name, v := range r.StringMap("kernel.params") {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			where := "kernel.params." + name
			if _, ok := env[name]; ok {
				where = EnvName(where)
			}
			return k, fmt.Errorf("%s=%q: kernel parameter %s is not a number", where, v, name)
		}
		k.Params[name] = f
	}
	return k, nil
}

// IgnoredModelKeys lists the model.* keys set in the file or the
// environment, which a federated site does not use: the coordinator's
// configuration is the federation's, model selection's keys included.
func (r Reader) IgnoredModelKeys() []string {
	var out []string
	for _, s := range ModelSettings {
		if !strings.HasPrefix(s.Key, "model.") {
			continue
		}
		if _, env := os.LookupEnv(EnvName(s.Key)); env || r.V.InConfig(s.Key) {
			out = append(out, s.Key)
		}
	}
	return out
}

// Federated reports whether the configuration makes this site part of a
// federation.
func (r Reader) Federated() bool {
	return r.V.GetString("federation.address") != "" || len(r.TransportOptions()) > 0
}

// TransportOptions returns federation.transport_options from the file,
// with CRFFD_FEDERATION_TRANSPORT_OPTIONS_<NAME> variables adding or
// replacing entries.
func (r Reader) TransportOptions() map[string]string {
	return r.StringMap("federation.transport_options")
}

// Transport returns the transport configuration of the daemon of role
// and federation name name.
func (r Reader) Transport(role transport.Role, name string) transport.Config {
	opts := map[string]string{}
	for k, v := range r.TransportOptions() {
		if k == "dir" || k == transport.OptionCapture {
			v = r.Resolve(v)
		}
		opts[k] = v
	}
	ca := r.Resolve(r.V.GetString("federation.tls.ca"))
	crl := r.Resolve(r.V.GetString("federation.tls.crl"))
	if crl == "" && ca != "" {
		crl = filepath.Join(filepath.Dir(ca), certs.CRLFile)
	}
	return transport.Config{
		Name:            name,
		Role:            role,
		Coordinator:     r.V.GetString("federation.address"),
		CoordinatorName: r.V.GetString("federation.coordinator"),
		TLS: certs.Files{
			CA:   ca,
			Cert: r.Resolve(r.V.GetString("federation.tls.cert")),
			Key:  r.Resolve(r.V.GetString("federation.tls.key")),
			CRL:  crl,
		},
		Options: opts,
	}
}

// CheckCRL refuses a federation.tls.crl named on purpose and not found,
// which would leave every revoked certificate valid without a word.
func (r Reader) CheckCRL() error {
	if crl := r.V.GetString("federation.tls.crl"); crl != "" {
		if _, err := os.Stat(r.Resolve(crl)); err != nil {
			return fmt.Errorf("federation.tls.crl: %w", err)
		}
	}
	return nil
}

// Metrics returns where /healthz and /metrics listen
// (federation.metrics_address, checked by MetricsAddress against
// federation.metrics_public), or "" for nowhere.
func (r Reader) Metrics() (string, error) {
	addr := r.V.GetString("federation.metrics_address")
	if addr == "" {
		return "", nil
	}
	public, err := cast.ToBoolE(r.V.Get("federation.metrics_public"))
	if err != nil {
		return "", fmt.Errorf("federation.metrics_public %q: want true or false", r.V.GetString("federation.metrics_public"))
	}
	return MetricsAddress(addr, public)
}

// MetricsAddress returns where /healthz and /metrics listen for the
// configured address. They have no authentication, so without public an
// address with no host listens on 127.0.0.1 and any host other than a
// loopback address or "localhost" is refused.
func MetricsAddress(addr string, public bool) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("federation.metrics_address %q: %w", addr, err)
	}
	if public {
		return addr, nil
	}
	if host == "" {
		return net.JoinHostPort("127.0.0.1", port), nil
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		return addr, nil
	}
	return "", fmt.Errorf("federation.metrics_address %q: /healthz and /metrics have no authentication, so they listen on loopback only (127.0.0.1, ::1 or localhost); set federation.metrics_public: true to serve them on %s", addr, host)
}

// Limits returns the limits.* settings.
func (r Reader) Limits() (federation.Limits, error) {
	v := r.V
	l := federation.Limits{
		Features: v.GetInt("limits.features"), Latent: v.GetInt("limits.latent"), Draws: v.GetInt("limits.draws"),
		Samples: v.GetInt("limits.samples"), MHSteps: v.GetInt("limits.mh_steps"), Folds: v.GetInt("limits.folds"),
		Rounds: v.GetInt("limits.rounds"), MinBatch: v.GetInt("limits.min_batch"), Kernels: v.GetInt("limits.kernels"),
		Sites: v.GetInt("limits.sites"), Candidates: v.GetInt("limits.candidates"),
	}
	for _, f := range []struct {
		key string
		v   int
	}{{"limits.features", l.Features}, {"limits.latent", l.Latent}, {"limits.draws", l.Draws}, {"limits.samples", l.Samples},
		{"limits.mh_steps", l.MHSteps}, {"limits.folds", l.Folds}, {"limits.rounds", l.Rounds}, {"limits.min_batch", l.MinBatch},
		{"limits.kernels", l.Kernels}, {"limits.sites", l.Sites}, {"limits.candidates", l.Candidates}} {
		if f.v < 1 {
			return l, fmt.Errorf("%s %d: want at least 1", f.key, f.v)
		}
	}
	for _, name := range r.StringList("limits.transfers") {
		t, err := estimator.ParseTransfer(strings.TrimSpace(name))
		if err != nil {
			return l, fmt.Errorf("limits.transfers: %w", err)
		}
		l.Transfers = append(l.Transfers, t)
	}
	return l, nil
}

// Privacy returns the privacy.* settings, nil when privacy.epsilon is
// 0, without a ledger (the caller sets it).
func (r Reader) Privacy() (*federation.SitePrivacy, error) {
	v := r.V
	eps := v.GetFloat64("privacy.epsilon")
	if eps == 0 {
		return nil, nil
	}
	p := &federation.SitePrivacy{
		Epsilon: eps, Delta: v.GetFloat64("privacy.delta"), RunEpsilon: v.GetFloat64("privacy.run_epsilon"),
		Clip: v.GetFloat64("privacy.clip"), Exact: v.GetStringSlice("privacy.exact"),
		PsiClip: v.GetFloat64("privacy.psi_clip"), NuisanceStatistics: v.GetBool("privacy.nuisance_statistics"),
	}
	if err := p.Check(); err != nil {
		return nil, err
	}
	bounds, err := r.PrivacyBounds()
	if err != nil {
		return nil, err
	}
	p.Bounds = bounds
	if err := p.CheckColumns(nil, estimator.Schema{BinaryOutcome: true}); err != nil {
		return nil, err
	}
	return p, nil
}

// PrivacyBounds reads privacy.bounds: per column, two numbers lo < hi.
func (r Reader) PrivacyBounds() (map[string]federation.Bound, error) {
	out := map[string]federation.Bound{}
	for name, v := range r.StringMap("privacy.bounds") {
		parts := strings.Split(v, ",")
		var b federation.Bound
		var err error
		if len(parts) == 2 {
			if b.Lo, err = strconv.ParseFloat(strings.TrimSpace(parts[0]), 64); err == nil {
				b.Hi, err = strconv.ParseFloat(strings.TrimSpace(parts[1]), 64)
			}
		}
		if len(parts) != 2 || err != nil || math.IsNaN(b.Lo) || math.IsNaN(b.Hi) || math.IsInf(b.Lo, 0) || math.IsInf(b.Hi, 0) || !(b.Lo < b.Hi) {
			return nil, fmt.Errorf("privacy.bounds.%s %q: want two finite numbers lo < hi, [lo, hi]", name, v)
		}
		out[name] = b
	}
	return out, nil
}
