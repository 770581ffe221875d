package config

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/viper"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/selection"
)

// EnvPrefix prefixes every environment variable crffd reads.
const EnvPrefix = "CRFFD"

// Setting is one configuration key. Every key crffd reads is listed in
// Settings, which is the single source of the defaults, the environment
// variable names and the configuration reference.
type Setting struct {
	Key     string // the dotted key, as in the YAML file
	Default any    // the default; a map's keys are free (IsMap)
	Usage   string // the help text of the configuration reference
}

// Settings lists every key, gathered from the tables that own them.
var Settings = slices.Concat(GlobalSettings, SiteSettings, ModelSettings, FederationSettings, PrivacySettings)

// GlobalSettings are the keys every command reads: plugins and logging.
var GlobalSettings = []Setting{
	{"plugin_dir", "", "directory holding the plugin executables; empty means the folder of the crffd executable"},
	{"plugin_sha256", map[string]string{}, "SHA-256 pins by plugin file name, e.g. crff-kernel-gaussian: <64 hex digits>; a binary that differs is refused"},
	{"log_level", "info", "debug, info, warn or error"},
	{"log_format", "text", "text or json (slog handlers, written to standard error)"},
}

// SiteSettings are the keys of a site's configuration: where its records
// are and how to read them. Paths are relative to the configuration file.
var SiteSettings = []Setting{
	{"site.name", "site", "the site's name: its identity in a federation and in logs"},
	{"site.db", "", "the site's SQLite file (relative paths are relative to the configuration file)"},
	{"site.table", "records", "the table or view holding the records"},
	{"site.id_column", "id", "the row id column (INTEGER or TEXT, unique)"},
	{"site.treatment_column", "w", "the treatment column (0 or 1)"},
	{"site.outcome_column", "y", "the outcome column"},
	{"site.covariates", []string{}, "covariate columns; empty means every other column holding a number (one value that is not is then an error; columns with no number are left out, and fit says so)"},
	{"site.binary", []string{}, "covariates that are binary (0/1); others not listed here or in site.continuous are detected from their values"},
	{"site.continuous", []string{}, "covariates that are continuous"},
	{"site.outcome_type", "auto", "continuous, binary, or auto (binary when every outcome is 0 or 1)"},
	{"site.identity_columns", []string{}, "columns identifying a person across sites, for de-duplication in a federation"},
	{"site.on_invalid", "refuse", "refuse: stop and name the offending rows; skip: leave them out and list them in crff_rejected"},
	{"site.busy_timeout", "5s", "how long to wait for a lock on the SQLite file"},
	{"site.poll_interval", "5s", "how often crffd site looks for new rows to score"},
	{"site.policy_thresholds", []string{"0"}, "the CATE thresholds T of the treatment rules cate_above_T that crff_policy evaluates on the held-out rows (treat where the uncalibrated CATE is above T, in the outcome's units), beside cate_lower_above_0, which is always there; at most 16, e.g. [0, 1.5]"},
	{"site.subgroups", "deny", "which of the coordinator's subgroups (coordinator.subgroups) the site evaluates and sends sums of: deny (none), allow (any), or a list of their names, each evaluated only with the predicate the site's own crff_subgroup holds under that name (a coordinator's other predicate is refused); two predicates that differ by one row reveal that row's score from their sums' difference, so allow trusts the coordinator with that; a differentially private site evaluates none"},
}

// ModelSettings are the estimator's hyperparameters and the kernel.
var ModelSettings = func() []Setting {
	d := estimator.DefaultConfig()
	return []Setting{
		{"kernel.name", "gaussian", "kernel plugin: crff-kernel-<name> in plugin_dir, or auto: choose among every installed kernel on held-out rows, the Gaussian the reference (crffd fit; at a coordinator, every site trains each kernel's models; at a site, it trains the kernels a coordinator chooses among, up to limits.kernels)"},
		{"kernel.params", map[string]float64{}, "kernel parameters, e.g. nu: 2.5 for matern"},
		{"kernel.grid", []string{}, "crffd fit only: further candidates of the first kernel (the Gaussian with kernel.name auto) at other settings, each features=N (D), linear=G (γ) and transfer=T (learned, none or full; none fits CausalRFF at each site on its own rows) joined by ':', e.g. [features=100:linear=0]; none by default (on IHDP they did not help)"},
		{"model.features", d.Features, "random frequencies D per feature map"},
		{"model.latent", d.Latent, "latent dimension dz"},
		{"model.rounds", d.Rounds, "maximum training rounds per model (with mini-batches, at least model.epochs passes over the largest site's rows)"},
		{"model.epochs", d.Epochs, "with mini-batches (model.batch_size), the least passes each model makes over the largest site's training rows: rounds = max(model.rounds, ⌈epochs·rows/batch_size⌉)"},
		{"model.optimizer", d.Method.String(), "lbfgs or adam"},
		{"model.learning_rate", d.LearningRate, "Adam's step size"},
		{"model.batch_size", d.BatchSize, "with adam, the rows of a site each training round computes on (a random batch, scaled to the site's size); a site of at most this many rows, and lbfgs, use every row; 0: every row"},
		{"model.samples", d.Samples, "effect samples per row"},
		{"model.folds", d.Folds, "folds over which the nuisance models of the doubly robust (AIPW) ATE are cross-fitted at each site"},
		{"model.mh_steps", d.MHSteps, "Metropolis–Hastings steps per effect sample (0: sample the latent z from q)"},
		{"model.transfer", d.Transfer.String(), "learned, none or full (federations only)"},
		{"model.transfer_prior", d.TransferPrior, "κ of the Beta(1+κ,1) prior on every learned transfer factor λ"},
		{"model.seed", int(d.Seed), "seed of the frequencies, initial weights and sampling"},
		{"model.estimator", "auto", "the CATE crff_cate reports: latent (CausalRFF's), outcome, tlearner, dr, or auto: the best on held-out rows (crff_model_selection lists the candidates; in a federation, the coordinator's setting decides)"},
		{"model.validation", 0.2, "share of each arm's rows held out of training to choose the estimator and kernel on, when there is a choice"},
		{"model.selection_z", selection.DefaultZ, "standard errors of the paired loss difference from the best candidate within which a candidate joins the reported ensemble"},
		{"model.selection_by_site", true, "coordinators: each site gets the ensemble of its own choice, among candidates that include a T-learner and a DR-learner of its own rows, made on its held-out rows with the other sites' loss differences pooled in by random effects; false: the federation's one ensemble for every site"},
	}
}()

// FederationSettings are the keys of the coordinator and of a site's
// federation section.
var FederationSettings = []Setting{
	{"federation.coordinator", "coordinator", "the coordinator's federation name (the common name of its certificate)"},
	{"federation.address", "", "the coordinator's host:port: where the coordinator listens (port 0 picks one) and where sites dial; a site with an address or transport options takes part in a federation"},
	{"federation.transport", "grpc", "transport plugin: crff-transport-<name> in plugin_dir (grpc: mutual TLS; spool: files in a shared directory, each signed with the sender's certificate key)"},
	{"federation.transport_options", map[string]string{}, "the transport's options, e.g. dir: SPOOL_DIR for spool (and unsigned: \"true\" to run it without certificates, trusting the folder's permissions alone), capture: FILE to record every envelope carried (paths are relative to the configuration file)"},
	{"federation.tls.ca", "", "the federation CA certificate (ca.crt, from crffd certs init)"},
	{"federation.tls.cert", "", "this daemon's certificate (NAME.crt, from crffd certs issue NAME)"},
	{"federation.tls.key", "", "this daemon's private key (NAME.key)"},
	{"federation.tls.crl", "", "the federation's revocation list (ca.crl, from crffd certs revoke), followed while the daemon runs; empty: ca.crl beside federation.tls.ca, if it is there"},
	{"federation.secret", "", "sites only: the secret shared by the sites and never by the coordinator (better set as CRFFD_FEDERATION_SECRET). It keys the column fingerprints (HMAC-SHA256; without it they are unkeyed SHA-256, which a dictionary of names reverses) and, with site.identity_columns, the de-duplication HMACs; every site needs the same; at least 128 bits, e.g. openssl rand -hex 32, or the site refuses to start"},
	{"federation.round_timeout", "2m", "coordinator: how long to wait for a site's answer before sending the step again"},
	{"federation.retries", 3, "coordinator: how often a silent site is asked again before the run stops with an error naming it"},
	{"federation.min_arm_rows", federation.DefaultMinArmRows, "sites only: the fewest rows each treatment arm must have, before and after de-duplication, for the site to take part, and the fewest rows by which a run's rows may differ from those of any earlier run the site took part in (added, deleted or edited; no difference is allowed too); below either the site sends nothing computed from its rows and stops with an error"},
	{"federation.metrics_address", "", "host:port serving /healthz and Prometheus /metrics, without authentication: loopback only (an empty host means 127.0.0.1) unless federation.metrics_public; empty for none"},
	{"federation.metrics_public", false, "allow federation.metrics_address on an interface other than loopback (an empty host then means every interface); /metrics and /healthz have no authentication, so put them behind a firewall or proxy"},
	{"coordinator.sites", []string{}, "the sites' federation names, in priority order: de-duplication keeps the copy of the site listed first"},
	{"coordinator.state_db", "coordinator.sqlite", "the coordinator's own SQLite file: checkpoints and finished runs"},
	{"coordinator.checkpoint_every", 0, "also checkpoint the training state every N rounds (0: by time only; with both 0, every round)"},
	{"coordinator.checkpoint_interval", "10s", "checkpoint the training state when this long has passed since the last checkpoint, and after every model; a restarted coordinator repeats the rounds since"},
	{"coordinator.run_every", "0s", "without --once: start a new run this often; 0 runs once, then serves health and metrics until stopped"},
	{"coordinator.min_sites", 0, "the fewest sites a run may cover: when sites refuse a run, are refused or fall silent, the coordinator runs again at once without them while at least this many remain; 0 means every listed site"},
	{"coordinator.subgroups", []any{}, "federated subgroups, a list of {name, predicate}: each a SQL predicate over the sites' tables (as crff_subgroup's) whose effect every site whose site.subgroups allows it evaluates on its own rows; the global effects land in each site's crff_gate (scope global)"},
	{"coordinator.retry_after", "1m", "without --once: after a failed or refused run, start the next this much later, doubling after each further failure up to 32 times as long"},
}

// PrivacySettings are a site's differential privacy and the limits it puts
// on what a coordinator may ask of it. Both are the site's own: a
// coordinator's setting of them is ignored.
var PrivacySettings = func() []Setting {
	l := federation.DefaultLimits()
	return []Setting{
		{"privacy.epsilon", 0.0, "sites only: the site's whole differential-privacy budget ε over every run; 0 turns privacy off. Training gradients are clipped per row and noised (see docs/privacy.md); a run that would pass the budget is refused, and crff_privacy shows what each run spent"},
		{"privacy.delta", 1e-5, "sites only: δ of the privacy budget and of every run"},
		{"privacy.run_epsilon", 0.0, "sites only: the ε one run spends (the noise is calibrated to it); 0 spends the whole privacy.epsilon in one run"},
		{"privacy.clip", 1.0, "sites only: the L2 norm each row's gradient is clipped to, in the model's standardised units"},
		{"privacy.exact", []string{federation.ExactRowCount}, "sites only: the aggregates a private site releases without noise, listed in crff_privacy, crffd report and the start log; row_count must be named (the guarantee is add/remove DP with the row count public); others: moments (the hello's column sums), ate (the ATE's sums), selection, balance (the balance sums, which a private site otherwise does not send)"},
		{"privacy.bounds", map[string]string{}, "sites only: the public range [lo, hi] of each continuous covariate and of a continuous outcome, by column name (age: [18, 100]; in the environment \"18,100\"): a private site clips each value to it before the hello's moments are noised, and the outcome's width caps privacy.psi_clip's default. Binary columns need none; a private site refuses to start while a continuous column has none, unless privacy.exact names moments. Take it from what the column can hold, never from the rows"},
		{"privacy.nuisance_statistics", false, "sites only: a private site with enough rows for the noise (federation.NuisanceRowsPerNoise) fits its AIPW's nuisance models from its sufficient statistics released to itself with noise, charged as the step nuisance, instead of taking the run's DP-trained models'; experimental, off until it beats them (docs/privacy.md)"},
		{"privacy.psi_clip", 0.0, "sites only: a private site clips each AIPW score ψ to [-psi_clip, psi_clip] (and each CATE to the outcome's range) before the ATE's sums are noised; 0: 8 pooled standard deviations of a continuous outcome (from the run's noised moments, at no further cost), at most 2 × the width of the outcome's privacy.bounds (2 for a binary outcome). Larger costs noise, smaller biases the ATE toward 0; the site logs how many rows it clipped"},
		{"limits.features", l.Features, "sites only: the most random frequencies (model.features) a coordinator may ask for"},
		{"limits.latent", l.Latent, "sites only: the most latent dimensions (model.latent)"},
		{"limits.draws", l.Draws, "sites only: the most noise draws per row in the latent model"},
		{"limits.samples", l.Samples, "sites only: the most effect samples per row (model.samples)"},
		{"limits.mh_steps", l.MHSteps, "sites only: the most Metropolis–Hastings steps (model.mh_steps)"},
		{"limits.folds", l.Folds, "sites only: the most cross-fitting folds (model.folds)"},
		{"limits.rounds", l.Rounds, "sites only: the most rounds of one model the site answers in a run, and the largest model.rounds it accepts"},
		{"limits.min_batch", l.MinBatch, "sites only: the smallest mini-batch (model.batch_size) the site computes a round on; a batch of one row would put that row's gradient on the wire"},
		{"limits.kernels", l.Kernels, "sites only: the most kernels whose models the site trains in one run, its own included (a coordinator's kernel.name auto asks three models of each; the site needs kernel.name auto to train more than one)"},
		{"limits.sites", l.Sites, "sites only: the most sites a run may have (the site keeps every site's name and its row of each model's transfer matrix)"},
		{"limits.candidates", l.Candidates, "sites only: the most candidates of model selection the site scores in a run (it holds each candidate's CATE of every row)"},
		{"limits.transfers", []string{}, "sites only: the transfer modes (learned, none, full) the site takes part in; empty allows all"},
	}
}()

// EnvName returns the environment variable that sets key.
func EnvName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(envReplacer.Replace(key))
}

var envReplacer = strings.NewReplacer(".", "_", "-", "_")

// NewViper returns a viper holding the default of every setting and
// reading CRFFD_ environment variables. The caller binds flags and reads
// a configuration file into it.
func NewViper() *viper.Viper {
	v := viper.New()
	for _, s := range Settings {
		v.SetDefault(s.Key, s.Default)
	}
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(envReplacer)
	v.AutomaticEnv()
	return v
}

// CheckKeys refuses a configuration file holding a key crffd does not
// know, which is most often a typo that would otherwise be ignored. path
// names the file in the error.
func CheckKeys(v *viper.Viper, path string) error {
	known := map[string]bool{}
	maps := map[string]bool{}
	for _, s := range Settings {
		known[s.Key] = true
		if IsMap(s.Default) {
			maps[s.Key] = true
		}
	}
	var unknown []string
	for _, k := range v.AllKeys() {
		if known[k] {
			continue
		}
		if i := strings.LastIndexByte(k, '.'); i > 0 && maps[k[:i]] {
			continue
		}
		if v.InConfig(k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("config %q: unknown key %s", path, strings.Join(unknown, ", "))
	}
	return nil
}

// EnvMap returns the entries of map key set in the environment: for every
// variable EnvName(key)_NAME, NAME lower-cased and its value. Viper sees
// only the keys it knows, so the free keys of a map are read here.
func EnvMap(key string) map[string]string {
	prefix := EnvName(key) + "_"
	out := map[string]string{}
	for _, kv := range os.Environ() {
		name, v, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(name, prefix) && len(name) > len(prefix) {
			out[strings.ToLower(name[len(prefix):])] = v
		}
	}
	return out
}

// IsMap reports whether a setting's default is a map, whose keys are free.
func IsMap(v any) bool {
	switch v.(type) {
	case map[string]string, map[string]float64:
		return true
	}
	return false
}

// Reference renders Settings as the Markdown table of the configuration
// reference in docs/configuration.md, so that the documentation is
// generated from the code and a test can tell when the two drift apart.
func Reference() string {
	var b strings.Builder
	b.WriteString("| key | default | environment | meaning |\n|---|---|---|---|\n")
	for _, s := range Settings {
		env := "`" + EnvName(s.Key) + "`"
		if IsMap(s.Default) {
			env = "`" + EnvName(s.Key) + "_<KEY>` (KEY upper-cased, `-` as `_`)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", s.Key, formatDefault(s.Default), env, s.Usage)
	}
	return b.String()
}
func formatDefault(v any) string {
	switch d := v.(type) {
	case string:
		if d == "" {
			return "(empty)"
		}
		return "`" + d + "`"
	case map[string]string:
		if len(d) == 0 {
			return "(none)"
		}
		keys := make([]string, 0, len(d))
		for k := range d {
			keys = append(keys, k+": "+d[k])
		}
		sort.Strings(keys)
		return "`" + strings.Join(keys, ", ") + "`"
	case []string:
		if len(d) == 0 {
			return "(none)"
		}
		return "`" + strings.Join(d, ", ") + "`"
	case map[string]float64:
		if len(d) == 0 {
			return "(none)"
		}
		return fmt.Sprintf("`%v`", d)
	default:
		return fmt.Sprintf("`%v`", d)
	}
}
