package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cast"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/selection"
	"github.com/crffd/crffd/store"
)

// siteSettings are the keys of a site's configuration: where its records
// are and how to read them. Paths are relative to the configuration file.
var siteSettings = []setting{
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
}

// modelSettings are the estimator's hyperparameters and the kernel.
var modelSettings = func() []setting {
	d := estimator.DefaultConfig()
	return []setting{
		{"kernel.name", "gaussian", "kernel plugin: crff-kernel-<name> in plugin_dir, or auto: choose among every installed kernel on held-out rows, the Gaussian the reference (crffd fit; at a coordinator, every site trains each kernel's models; at a site, it trains the kernels a coordinator chooses among, up to limits.kernels)"},
		{"kernel.params", map[string]float64{}, "kernel parameters, e.g. nu: 2.5 for matern"},
		{"kernel.grid", []string{}, "crffd fit only: further candidates of the first kernel (the Gaussian with kernel.name auto) at other settings, each features=N (D) and/or linear=G (γ) joined by ':', e.g. [features=100:linear=0]; none by default (on IHDP they did not help)"},
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
	}
}()

// siteSource returns the configured records source, with the database
// path resolved against the configuration file's folder.
//
// Each key is read on its own, so that the environment (CRFFD_SITE_TABLE)
// and the defaults of siteSettings apply to it as to every other key:
// unmarshalling the site section as a whole would see the file alone.
func (a *app) siteSource() (store.Source, error) {
	src := store.Source{
		DB:              a.v.GetString("site.db"),
		Table:           a.v.GetString("site.table"),
		IDColumn:        a.v.GetString("site.id_column"),
		TreatmentColumn: a.v.GetString("site.treatment_column"),
		OutcomeColumn:   a.v.GetString("site.outcome_column"),
		Covariates:      a.stringList("site.covariates"),
		Binary:          a.stringList("site.binary"),
		Continuous:      a.stringList("site.continuous"),
		OutcomeType:     store.OutcomeType(a.v.GetString("site.outcome_type")),
		IdentityColumns: a.stringList("site.identity_columns"),
		OnInvalid:       store.OnInvalid(a.v.GetString("site.on_invalid")),
	}
	if src.DB == "" {
		return src, fmt.Errorf("site configuration: site.db is not set (the site's SQLite file)")
	}
	src.DB = a.resolve(src.DB)
	return src, src.Validate()
}

// stringList reads a list key: a YAML list, or from the environment a
// string of names separated by commas or spaces (CRFFD_SITE_COVARIATES=
// "age,score").
// An empty list is nil.
func (a *app) stringList(key string) []string {
	var out []string
	if v, ok := a.v.Get(key).(string); ok {
		out = strings.FieldsFunc(v, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	} else {
		out = a.v.GetStringSlice(key)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// resolve makes a relative path relative to the configuration file.
func (a *app) resolve(path string) string {
	if path == "" || filepath.IsAbs(path) || a.configFile == "" {
		return path
	}
	return filepath.Join(filepath.Dir(a.configFile), path)
}

// modelConfig returns the estimator configuration from the model.* keys.
func (a *app) modelConfig() (estimator.Config, error) {
	c := estimator.DefaultConfig()
	c.Features = a.v.GetInt("model.features")
	c.Latent = a.v.GetInt("model.latent")
	c.Rounds = a.v.GetInt("model.rounds")
	c.LearningRate = a.v.GetFloat64("model.learning_rate")
	c.BatchSize = a.v.GetInt("model.batch_size")
	c.Epochs = a.v.GetFloat64("model.epochs")
	if !(c.Epochs >= 0) || math.IsInf(c.Epochs, 1) {
		return c, fmt.Errorf("model.epochs %v: want a finite, non-negative number of passes", c.Epochs)
	}
	if c.BatchSize < 0 {
		return c, fmt.Errorf("model.batch_size %d: want 0 (every row) or a positive row count", c.BatchSize)
	}
	c.Samples = a.v.GetInt("model.samples")
	c.MHSteps = a.v.GetInt("model.mh_steps")
	c.Folds = a.v.GetInt("model.folds")
	if err := checkFolds(c.Folds); err != nil {
		return c, fmt.Errorf("model.folds: %w", err)
	}
	c.Seed = a.v.GetUint64("model.seed")
	c.TransferPrior = a.v.GetFloat64("model.transfer_prior")
	switch m := a.v.GetString("model.optimizer"); m {
	case "lbfgs":
		c.Method = estimator.LBFGS
	case "adam":
		c.Method = estimator.Adam
	default:
		return c, fmt.Errorf("model.optimizer %q: want lbfgs or adam", m)
	}
	t, err := estimator.ParseTransfer(a.v.GetString("model.transfer"))
	if err != nil {
		return c, fmt.Errorf("model.transfer: %w", err)
	}
	c.Transfer = t
	return c, nil
}

// kernelRef returns the configured kernel: kernel.params from the file,
// with CRFFD_KERNEL_PARAMS_<NAME> variables adding or replacing entries.
func (a *app) kernelRef() (modelstore.Kernel, error) {
	k := modelstore.Kernel{Name: a.v.GetString("kernel.name"), Params: map[string]float64{}}
	env := envMap("kernel.params")
	for name, v := range a.stringMap("kernel.params") {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			where := "kernel.params." + name
			if _, ok := env[name]; ok {
				where = envName(where)
			}
			return k, fmt.Errorf("%s=%q: kernel parameter %s is not a number", where, v, name)
		}
		k.Params[name] = f
	}
	return k, nil
}

// durationSetting reads a positive duration key.
func (a *app) durationSetting(key string) (time.Duration, error) {
	d, err := a.duration(key)
	if err == nil && d <= 0 {
		err = fmt.Errorf("%s %q: want a positive duration such as 5s", key, a.v.GetString(key))
	}
	return d, err
}

// duration reads key as a duration ≥ 0, refusing text that is not one
// ("10 seconds"), which viper would read as 0.
func (a *app) duration(key string) (time.Duration, error) {
	d, err := cast.ToDurationE(a.v.Get(key))
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s %q: want a duration ≥ 0 such as 5s", key, a.v.GetString(key))
	}
	return d, nil
}

// openSpectral opens the kernel plugin a setup names; the plugin is killed
// when ctx's command ends (plugins are managed).
func (a *app) openSpectral(ctx context.Context, k modelstore.Kernel) (estimator.Spectral, error) {
	dir, err := a.pluginDir()
	if err != nil {
		return nil, err
	}
	c, err := a.openKernelCtx(ctx, dir, k.Name, k.Params)
	if err != nil {
		return nil, err // not c: a nil *Client would be a non-nil Spectral
	}
	return c, nil
}

// openSite opens the configured site file with the configured busy timeout.
// The caller closes it. A busy timeout that is not a duration is a
// configuration error (exitConfig), which a caller's withExit keeps.
func (a *app) openSite(ctx context.Context, src store.Source) (*store.Site, error) {
	timeout, err := a.durationSetting("site.busy_timeout")
	if err != nil {
		return nil, withExit(exitConfig, err)
	}
	return store.Open(ctx, src.DB, store.Options{BusyTimeout: timeout, Logger: a.log})
}

// openRecords opens the site file of src and reads its records, as fit,
// check and privacy audit do. The caller closes the file.
func (a *app) openRecords(ctx context.Context, src store.Source) (*store.Site, *store.Records, error) {
	db, err := a.openSite(ctx, src)
	if err != nil {
		return nil, nil, err
	}
	recs, err := db.ReadRecords(ctx, src)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, recs, nil
}

// checkFolds refuses a number of cross-fitting folds that the estimator
// would refuse, before any work: 0 (the default) or at least 2.
func checkFolds(k int) error {
	if k < 0 || k == 1 {
		return fmt.Errorf("%d folds: want 0 (the default, %d) or at least 2", k, estimator.DefaultFolds)
	}
	return nil
}

// ignoredModelKeys lists the model.* keys set in the file or the
// environment, which a federated site does not use: the coordinator's
// configuration is the federation's, model selection's keys included.
func (a *app) ignoredModelKeys() []string {
	var out []string
	for _, s := range modelSettings {
		if !strings.HasPrefix(s.Key, "model.") {
			continue
		}
		if _, env := os.LookupEnv(envName(s.Key)); env || a.v.InConfig(s.Key) {
			out = append(out, s.Key)
		}
	}
	return out
}
