package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/crffd/crffd/config"
	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/plugins/transport"
	"github.com/crffd/crffd/store"
)

// execute runs crffd in process with args and returns the app state.
func execute(t *testing.T, args ...string) (*app, error) {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{stdout: &out, stderr: &errb}
	root := rootCmd(a)
	root.SetArgs(args)
	err := root.Execute()
	return a, err
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "crffd.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigPrecedence checks defaults < file < environment < flags.
func TestConfigPrecedence(t *testing.T) {
	file := writeConfig(t, "plugin_dir: /from/file\nlog_level: warn\n")
	for _, tc := range []struct {
		name string
		env  string
		args []string
		want string
	}{
		{"default", "", []string{"version"}, ""},
		{"file", "", []string{"version", "--config", file}, "/from/file"},
		{"environment over file", "/from/env", []string{"version", "--config", file}, "/from/env"},
		{"flag over environment", "/from/env", []string{"version", "--config", file, "--plugin-dir", "/from/flag"}, "/from/flag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("CRFFD_PLUGIN_DIR", tc.env)
			}
			a, err := execute(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := a.v.GetString("plugin_dir"); got != tc.want {
				t.Errorf("plugin_dir = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args func(t *testing.T) []string
		env  [2]string
		want string
	}{
		{"missing file", func(t *testing.T) []string {
			return []string{"version", "--config", "/nonexistent/crffd.yaml"}
		}, [2]string{}, `read config "/nonexistent/crffd.yaml"`},
		{"not YAML", func(t *testing.T) []string {
			return []string{"version", "--config", writeConfig(t, "plugin_dir: [unclosed\n")}
		}, [2]string{}, "read config"},
		{"unknown key", func(t *testing.T) []string {
			return []string{"version", "--config", writeConfig(t, "plugin_dri: /x\nlog_level: info\n")}
		}, [2]string{}, "unknown key plugin_dri"},
		{"bad log level flag", func(t *testing.T) []string {
			return []string{"version", "--log-level", "loud"}
		}, [2]string{}, `log_level "loud"`},
		{"site arm minimum below one", func(t *testing.T) []string {
			return []string{"site", "--config", writeConfig(t, "site:\n  name: a\n  db: a.sqlite\n  table: records\n  id_column: id\n  treatment_column: w\n  outcome_column: y\nfederation:\n  address: 127.0.0.1:1\n  min_arm_rows: 0\n")}
		}, [2]string{}, "federation.min_arm_rows 0: want at least 1"},
		{"site subgroups mixing a policy with names", func(t *testing.T) []string {
			return []string{"site", "--config", writeConfig(t, "site:\n  name: a\n  db: a.sqlite\n  table: records\n  id_column: id\n  treatment_column: w\n  outcome_column: y\n  subgroups: [old, allow]\nfederation:\n  address: 127.0.0.1:1\n")}
		}, [2]string{}, `not "allow" among names`},
		{"coordinator subgroups named twice", func(t *testing.T) []string {
			return []string{"coordinator", "--config", writeConfig(t, "coordinator:\n  sites: [a, b]\n  subgroups:\n    - {name: old, predicate: age > 65}\n    - {name: old, predicate: age > 70}\nfederation:\n  address: 127.0.0.1:1\n")}
		}, [2]string{}, `coordinator.subgroups: subgroup "old" is named twice`},
		{"coordinator subgroups not a list of maps", func(t *testing.T) []string {
			return []string{"coordinator", "--config", writeConfig(t, "coordinator:\n  sites: [a, b]\n  subgroups: age > 65\nfederation:\n  address: 127.0.0.1:1\n")}
		}, [2]string{}, "coordinator.subgroups: a list of {name, predicate}"},
		{"privacy delta out of range", func(t *testing.T) []string {
			return []string{"site", "--config", writeConfig(t, "site:\n  name: a\n  db: a.sqlite\n  table: records\n  id_column: id\n  treatment_column: w\n  outcome_column: y\nfederation:\n  address: 127.0.0.1:1\nprivacy:\n  epsilon: 1\n  delta: 2\n")}
		}, [2]string{}, "privacy: delta 2 must be in (0, 1)"},
		{"privacy run epsilon above the budget", func(t *testing.T) []string {
			return []string{"site", "--config", writeConfig(t, "site:\n  name: a\n  db: a.sqlite\n  table: records\n  id_column: id\n  treatment_column: w\n  outcome_column: y\nfederation:\n  address: 127.0.0.1:1\nprivacy:\n  epsilon: 1\n  run_epsilon: 2\n")}
		}, [2]string{}, "privacy: run_epsilon 2 must be in [0, epsilon 1]"},
		{"privacy clip", func(t *testing.T) []string {
			return []string{"site", "--config", writeConfig(t, "site:\n  name: a\n  db: a.sqlite\n  table: records\n  id_column: id\n  treatment_column: w\n  outcome_column: y\nfederation:\n  address: 127.0.0.1:1\nprivacy:\n  epsilon: 1\n  clip: 0\n")}
		}, [2]string{}, "privacy: clip 0 must be positive"},
		{"privacy exact without the row count", func(t *testing.T) []string {
			return []string{"site", "--config", writeConfig(t, "site:\n  name: a\n  db: a.sqlite\n  table: records\n  id_column: id\n  treatment_column: w\n  outcome_column: y\nfederation:\n  address: 127.0.0.1:1\nprivacy:\n  epsilon: 1\n  exact: [ate]\n")}
		}, [2]string{}, "privacy: exact must name row_count"},
		{"privacy exact unknown", func(t *testing.T) []string {
			return []string{"site", "--config", writeConfig(t, "site:\n  name: a\n  db: a.sqlite\n  table: records\n  id_column: id\n  treatment_column: w\n  outcome_column: y\nfederation:\n  address: 127.0.0.1:1\nprivacy:\n  epsilon: 1\n  exact: [row_count, gradients]\n")}
		}, [2]string{}, `privacy: exact names "gradients"`},
		{"privacy bound not a range", func(t *testing.T) []string {
			return []string{"site", "--config", writeConfig(t, "site:\n  name: a\n  db: a.sqlite\n  table: records\n  id_column: id\n  treatment_column: w\n  outcome_column: y\nfederation:\n  address: 127.0.0.1:1\nprivacy:\n  epsilon: 1\n  bounds:\n    age: [100, 18]\n")}
		}, [2]string{}, `privacy.bounds.age "100,18": want two finite numbers lo < hi`},
		{"privacy bound of one number", func(t *testing.T) []string {
			return []string{"site", "--config", writeConfig(t, "site:\n  name: a\n  db: a.sqlite\n  table: records\n  id_column: id\n  treatment_column: w\n  outcome_column: y\nfederation:\n  address: 127.0.0.1:1\nprivacy:\n  epsilon: 1\n")}
		}, [2]string{"CRFFD_PRIVACY_BOUNDS_AGE", "18"}, `privacy.bounds.age "18": want two finite numbers lo < hi`},
		{"privacy psi_clip negative", func(t *testing.T) []string {
			return []string{"site", "--config", writeConfig(t, "site:\n  name: a\n  db: a.sqlite\n  table: records\n  id_column: id\n  treatment_column: w\n  outcome_column: y\nfederation:\n  address: 127.0.0.1:1\nprivacy:\n  epsilon: 1\n  psi_clip: -2\n")}
		}, [2]string{}, "privacy: psi_clip -2 must be finite and not negative"},
		{"limit below one", func(t *testing.T) []string {
			return []string{"site", "--config", writeConfig(t, "site:\n  name: a\n  db: a.sqlite\n  table: records\n  id_column: id\n  treatment_column: w\n  outcome_column: y\nfederation:\n  address: 127.0.0.1:1\nlimits:\n  features: 0\n")}
		}, [2]string{}, "limits.features 0: want at least 1"},
		{"unknown transfer limit", func(t *testing.T) []string {
			return []string{"site", "--config", writeConfig(t, "site:\n  name: a\n  db: a.sqlite\n  table: records\n  id_column: id\n  treatment_column: w\n  outcome_column: y\nfederation:\n  address: 127.0.0.1:1\nlimits:\n  transfers: [sideways]\n")}
		}, [2]string{}, `limits.transfers: estimator: unknown transfer mode "sideways"`},
		{"eval epsilon not positive", func(t *testing.T) []string {
			return []string{"eval", "--data", "ihdp", "--epsilon", "1,0"}
		}, [2]string{}, `--epsilon [1 0]: want positive numbers or inf`},
		{"eval bound not a range", func(t *testing.T) []string {
			return []string{"eval", "--data", "ihdp", "--epsilon", "1", "--bounds", "y=5"}
		}, [2]string{}, `--bounds "y=5": want NAME=LO,HI with finite LO < HI`},
		{"bad log format env", func(t *testing.T) []string {
			return []string{"version"}
		}, [2]string{"CRFFD_LOG_FORMAT", "xml"}, `log_format "xml"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env[0] != "" {
				t.Setenv(tc.env[0], tc.env[1])
			}
			_, err := execute(t, tc.args(t)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestModelFolds sets model.folds through the file and the environment,
// which overrides the file, and refuses a value the estimator would.
func TestModelFolds(t *testing.T) {
	file := writeConfig(t, "model:\n  folds: 3\n")
	for _, tc := range []struct {
		name, env string
		args      []string
		want      int
		err       string
	}{
		{"default", "", []string{"version"}, 5, ""},
		{"file", "", []string{"version", "--config", file}, 3, ""},
		{"environment over file", "7", []string{"version", "--config", file}, 7, ""},
		{"one fold", "1", []string{"version"}, 0, "model.folds: 1 folds: want 0 (the default, 5) or at least 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("CRFFD_MODEL_FOLDS", tc.env)
			}
			cfg, ok := modelConfigOf(t, tc.err, tc.args...)
			if ok && cfg.Folds != tc.want {
				t.Errorf("folds %d; want %d", cfg.Folds, tc.want)
			}
		})
	}
}

// TestModelBatchSettings reads model.batch_size and model.epochs and
// refuses values the estimator would.
func TestModelBatchSettings(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		env        map[string]string
		batch      int
		epochs     float64
		err        string
	}{
		{"default", "", nil, 4096, 1, ""},
		{"file", "model:\n  batch_size: 512\n  epochs: 2.5\n", nil, 512, 2.5, ""},
		{"environment over file", "model:\n  batch_size: 512\n  epochs: 2.5\n", map[string]string{"CRFFD_MODEL_BATCH_SIZE": "256", "CRFFD_MODEL_EPOCHS": "3"}, 256, 3, ""},
		{"negative batch", "model:\n  batch_size: -1\n", nil, 0, 0, "model.batch_size -1: want 0 (every row) or a positive row count"},
		{"negative epochs", "model:\n  epochs: -1\n", nil, 0, 0, "model.epochs -1: want a finite, non-negative number of passes"},
		{"infinite epochs from the environment", "", map[string]string{"CRFFD_MODEL_EPOCHS": "+Inf"}, 0, 0, "model.epochs +Inf: want a finite, non-negative number of passes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			args := []string{"version"}
			if tc.file != "" {
				args = append(args, "--config", writeConfig(t, tc.file))
			}
			cfg, ok := modelConfigOf(t, tc.err, args...)
			if ok && (cfg.BatchSize != tc.batch || cfg.Epochs != tc.epochs) {
				t.Errorf("batch %d, epochs %v; want %d, %v", cfg.BatchSize, cfg.Epochs, tc.batch, tc.epochs)
			}
		})
	}
}

// TestFederatedSelection: the coordinator turns model.estimator,
// model.validation, model.selection_z and kernel.name into the run's
// selection (none for the latent CATE of one kernel); kernel.name auto
// needs kernel plugins (the e2e tests run it with them).
func TestFederatedSelection(t *testing.T) {
	for _, tc := range []struct{ file, want, err string }{
		{"model:\n  estimator: latent\n", "{Share:0 Kinds:[] Ridge:[] Z:0 BySite:false Kernel:}", ""},
		{"model:\n  estimator: auto\n", "{Share:0.2 Kinds:[] Ridge:[] Z:1 BySite:true Kernel:gaussian}", ""},
		{"", "{Share:0.2 Kinds:[] Ridge:[] Z:1 BySite:true Kernel:gaussian}", ""},
		{"model:\n  estimator: dr\n  validation: 0.3\n  selection_z: 0\n", "{Share:0.3 Kinds:[dr] Ridge:[] Z:0 BySite:true Kernel:gaussian}", ""},
		{"model:\n  estimator: forest\n", "", `model.estimator "forest"`},
		{"model:\n  estimator: auto\n  validation: 1\n", "", "model.validation 1"},
		{"kernel:\n  name: laplacian\n", "{Share:0.2 Kinds:[] Ridge:[] Z:1 BySite:true Kernel:laplacian}", ""},
		{"model:\n  selection_by_site: false\n", "{Share:0.2 Kinds:[] Ridge:[] Z:1 BySite:false Kernel:gaussian}", ""},
		{"kernel:\n  name: matern\n  params:\n    nu: 0.5\nmodel:\n  estimator: latent\n", "{Share:0 Kinds:[] Ridge:[] Z:0 BySite:false Kernel:}", ""},
		{"kernel:\n  grid: [features=10]\n", "", "kernel.grid points of features or linear run in crffd fit only"},
		{"kernel:\n  grid: [transfer=none]\n", "{Share:0.2 Kinds:[] Ridge:[] Z:1 BySite:true Kernel:gaussian}", ""},
		{"kernel:\n  grid: [features=10:nu=2]\n", "", `kernel.grid "features=10:nu=2": "nu=2" is not features=N, linear=G or transfer=T`},
		{"kernel:\n  grid: [transfer=some]\n", "", `kernel.grid "transfer=some": transfer="some": want learned, none or full`},
		{"kernel:\n  grid: [features=0]\n", "", `kernel.grid "features=0": features="0"`},
		{"kernel:\n  grid: [\"\"]\n", "", "a point sets features=N, linear=G, transfer=T or several"},
		{"plugin_dir: " + t.TempDir() + "\nkernel:\n  name: auto\n", "", "kernel.name auto: no kernel plugins"},
	} {
		a, err := execute(t, "version", "--config", writeConfig(t, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		c, err := a.choiceSettings(context.Background())
		var sel federation.Selection
		if err == nil {
			sel, err = config.FederatedSelection(c)
		}
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: %v, want %q", tc.file, err, tc.err)
			continue
		}
		if got := fmt.Sprintf("%+v", sel); err == nil && got != tc.want {
			t.Errorf("%q: selection %s, want %s", tc.file, got, tc.want)
		}
	}
}

// TestSiteSourceLayers reads every site key through the three layers:
// the documented default when neither the file nor the environment sets
// it (even with a site section present), the file, and the environment
// over the file.
func TestSiteSourceLayers(t *testing.T) {
	file := writeConfig(t, "site:\n  db: clinic.sqlite\n  table: visits\n  covariates: [age, sex]\n  on_invalid: skip\n")
	for _, tc := range []struct {
		name string
		env  map[string]string
		want store.Source
	}{
		{"defaults beside a site section", nil, store.Source{Table: "visits", IDColumn: "id", TreatmentColumn: "w", OutcomeColumn: "y",
			Covariates: []string{"age", "sex"}, OutcomeType: "auto", OnInvalid: "skip"}},
		{"environment over file", map[string]string{
			"CRFFD_SITE_TABLE": "patients", "CRFFD_SITE_ID_COLUMN": "pid", "CRFFD_SITE_TREATMENT_COLUMN": "treated",
			"CRFFD_SITE_OUTCOME_COLUMN": "los", "CRFFD_SITE_COVARIATES": "age, sex score bmi", "CRFFD_SITE_BINARY": "sex",
			"CRFFD_SITE_CONTINUOUS": "bmi", "CRFFD_SITE_OUTCOME_TYPE": "continuous", "CRFFD_SITE_IDENTITY_COLUMNS": "nhs_number",
			"CRFFD_SITE_ON_INVALID": "refuse"},
			store.Source{Table: "patients", IDColumn: "pid", TreatmentColumn: "treated", OutcomeColumn: "los",
				Covariates: []string{"age", "sex", "score", "bmi"}, Binary: []string{"sex"}, Continuous: []string{"bmi"},
				OutcomeType: "continuous", IdentityColumns: []string{"nhs_number"}, OnInvalid: "refuse"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			a, err := execute(t, "version", "--config", file)
			if err != nil {
				t.Fatal(err)
			}
			src, err := a.conf().SiteSource()
			if err != nil {
				t.Fatal(err)
			}
			if filepath.Base(src.DB) != "clinic.sqlite" {
				t.Errorf("db %q, want clinic.sqlite beside the file", src.DB)
			}
			src.DB = ""
			if !reflect.DeepEqual(src, tc.want) {
				t.Errorf("source %+v,\nwant %+v", src, tc.want)
			}
		})
	}
	// The record flags of fit and check (addRecordFlags) over the
	// environment over the file. check fails to open the missing file,
	// after reading its settings.
	for k, v := range map[string]string{"CRFFD_SITE_ID_COLUMN": "pid", "CRFFD_SITE_TREATMENT_COLUMN": "treated", "CRFFD_SITE_OUTCOME_COLUMN": "los"} {
		t.Setenv(k, v)
	}
	missing := filepath.Join(t.TempDir(), "absent.sqlite")
	for _, cmd := range []string{"check", "fit"} {
		a, err := execute(t, cmd, "--config", file, "--db", missing, "--table", "t2", "--id", "rid", "--treatment", "arm",
			"--outcome", "out", "--covariates", "a,b")
		if err == nil {
			t.Fatalf("%s of a missing file succeeded", cmd)
		}
		src, err := a.conf().SiteSource()
		if err != nil {
			t.Fatal(err)
		}
		want := store.Source{DB: missing, Table: "t2", IDColumn: "rid", TreatmentColumn: "arm", OutcomeColumn: "out",
			Covariates: []string{"a", "b"}, OutcomeType: "auto", OnInvalid: "skip"}
		if !reflect.DeepEqual(src, want) {
			t.Errorf("%s: source %+v,\nwant %+v", cmd, src, want)
		}
	}

	t.Setenv("CRFFD_SITE_DB", "/elsewhere/other.sqlite")
	a, err := execute(t, "version", "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if src, err := a.conf().SiteSource(); err != nil || src.DB != "/elsewhere/other.sqlite" {
		t.Errorf("CRFFD_SITE_DB: db %q, %v", src.DB, err)
	}
}

// TestMapKeysFromEnvironment sets the free keys of map settings through
// the environment, over the file, and refuses a kernel parameter that is
// not a number, naming the variable.
func TestMapKeysFromEnvironment(t *testing.T) {
	file := writeConfig(t, "kernel:\n  name: matern\n  params:\n    nu: 2.5\nfederation:\n  transport: spool\n")
	a, err := execute(t, "version", "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := a.conf().Kernel(); err != nil || k.Params["nu"] != 2.5 {
		t.Errorf("from the file: %v, %v", k, err)
	}
	if a.conf().Federated() {
		t.Error("a site without address or transport options counts as federated")
	}

	t.Setenv("CRFFD_KERNEL_PARAMS_NU", "1.5")
	t.Setenv("CRFFD_FEDERATION_TRANSPORT_OPTIONS_DIR", "/srv/spool")
	if k, err := a.conf().Kernel(); err != nil || k.Params["nu"] != 1.5 {
		t.Errorf("CRFFD_KERNEL_PARAMS_NU: %v, %v", k, err)
	}
	if !a.conf().Federated() {
		t.Error("a site given its spool directory through the environment does not count as federated")
	}
	if got := a.conf().Transport(transport.RoleSite, "s1").Options["dir"]; got != "/srv/spool" {
		t.Errorf("CRFFD_FEDERATION_TRANSPORT_OPTIONS_DIR: dir %q", got)
	}
	t.Setenv("CRFFD_KERNEL_PARAMS_NU", "one")
	if _, err := a.conf().Kernel(); err == nil || !strings.Contains(err.Error(), `CRFFD_KERNEL_PARAMS_NU="one": kernel parameter nu is not a number`) {
		t.Errorf("bad CRFFD_KERNEL_PARAMS_NU: %v", err)
	}
	// A parameter in the file that is not a number was read as 0 before.
	os.Unsetenv("CRFFD_KERNEL_PARAMS_NU") // t.Setenv restores it
	a, err = execute(t, "version", "--config", writeConfig(t, "kernel:\n  name: matern\n  params:\n    nu: one and a half\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.conf().Kernel(); err == nil || !strings.Contains(err.Error(), `kernel.params.nu="one and a half": kernel parameter nu is not a number`) {
		t.Errorf("bad kernel.params.nu in the file: %v", err)
	}
}

// TestIgnoredModelKeys lists the model.* keys a federated site was given
// in its file or environment, which it does not use: model selection's
// among them, which the coordinator's configuration decides.
func TestIgnoredModelKeys(t *testing.T) {
	file := writeConfig(t, "model:\n  features: 50\n  estimator: latent\n")
	t.Setenv("CRFFD_MODEL_ROUNDS", "10")
	a, err := execute(t, "version", "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(a.conf().IgnoredModelKeys(), ", "); got != "model.features, model.rounds, model.estimator" {
		t.Errorf("ignored keys %q, want model.features, model.rounds, model.estimator", got)
	}
}

// TestChoiceSettingsLayers sets model.estimator, model.validation and
// model.selection_z through the file and the environment (over the file),
// and reads their defaults. (No flag sets model.* keys.)
func TestChoiceSettingsLayers(t *testing.T) {
	file := writeConfig(t, "model:\n  estimator: outcome\n  validation: 0.3\n  selection_z: 2\n")
	for _, tc := range []struct {
		name  string
		args  []string
		env   map[string]string
		kinds []string
		share float64
		z     float64
	}{
		{"defaults", []string{"version"}, nil, nil, 0.2, 1},
		{"file", []string{"version", "--config", file}, nil, []string{"outcome"}, 0.3, 2},
		{"environment over file", []string{"version", "--config", file},
			map[string]string{"CRFFD_MODEL_ESTIMATOR": "dr", "CRFFD_MODEL_VALIDATION": "0.25", "CRFFD_MODEL_SELECTION_Z": "0.5"},
			[]string{"dr"}, 0.25, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			a, err := execute(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			c, err := a.choiceSettings(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.Kinds, tc.kinds) || c.Share != tc.share || c.Z != tc.z {
				t.Errorf("kinds %v, share %v, z %v; want %v, %v, %v", c.Kinds, c.Share, c.Z, tc.kinds, tc.share, tc.z)
			}
			if len(c.Kernels) != 1 || c.Kernels[0].Name != "gaussian" {
				t.Errorf("kernels %v, want the configured gaussian", c.Kernels)
			}
		})
	}
}

// TestDurationSettings: a duration key holding text that is not a duration
// is an error naming the key, not a silent 0, and durationSetting also
// refuses 0.
func TestDurationSettings(t *testing.T) {
	for _, tc := range []struct{ value, err string }{
		{"10s", ""}, {"0s", ""}, {"10 seconds", `coordinator.checkpoint_interval "10 seconds": want a duration`}, {"-1s", "want a duration ≥ 0"},
	} {
		a, err := execute(t, "version", "--config", writeConfig(t, "coordinator:\n  checkpoint_interval: "+tc.value+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.conf().Duration("coordinator.checkpoint_interval")
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: %v, want %q", tc.value, err, tc.err)
		}
	}
	a, _ := execute(t, "version", "--config", writeConfig(t, "site:\n  poll_interval: 0s\n"))
	if _, err := a.conf().PositiveDuration("site.poll_interval"); err == nil || !strings.Contains(err.Error(), "want a positive duration") {
		t.Errorf("poll_interval 0s: %v", err)
	}
}

// modelConfigOf runs crffd with args and reads the model configuration.
// With wantErr it checks that reading fails with exactly that message and
// reports false; otherwise it fails the test on an error and reports true.
func modelConfigOf(t *testing.T, wantErr string, args ...string) (estimator.Config, bool) {
	t.Helper()
	a, err := execute(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := a.conf().Model()
	if wantErr != "" {
		if err == nil || err.Error() != wantErr {
			t.Errorf("error %v, want %q", err, wantErr)
		}
		return cfg, false
	}
	if err != nil {
		t.Errorf("model configuration: %v", err)
		return cfg, false
	}
	return cfg, true
}

// TestTransportConfigBindsTheCoordinator passes the coordinator's name and
// the revocation list to the transport, so that a site checks whom it
// dials and which certificates are revoked.
func TestTransportConfigBindsTheCoordinator(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "site.yaml")
	if err := os.WriteFile(file, []byte("federation:\n  coordinator: hub\n  tls:\n    ca: tls/ca.crt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := execute(t, "version", "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	c := a.conf().Transport(transport.RoleSite, "s1")
	if c.CoordinatorName != "hub" || c.TLS.CRL != filepath.Join(dir, "tls", "ca.crl") {
		t.Errorf("coordinator name %q, revocation list %q; want hub and tls/ca.crl beside ca.crt", c.CoordinatorName, c.TLS.CRL)
	}
	t.Setenv("CRFFD_FEDERATION_TLS_CRL", "revoked.crl")
	if c := a.conf().Transport(transport.RoleSite, "s1"); c.TLS.CRL != filepath.Join(dir, "revoked.crl") {
		t.Errorf("federation.tls.crl: %q", c.TLS.CRL)
	}
	if _, err := a.openTransport(context.Background(), transport.RoleSite, "s1"); err == nil || !strings.Contains(err.Error(), "federation.tls.crl") {
		t.Errorf("a missing federation.tls.crl: %v", err)
	}
}

// TestPrivacyAndLimitsSettings reads privacy.*, limits.* and
// federation.tls.crl from the file, and the environment over it. (These
// keys have no flags.)
func TestPrivacyAndLimitsSettings(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "site.yaml")
	body := "privacy:\n  epsilon: 8\n  run_epsilon: 2\n  delta: 1e-6\n  clip: 0.5\n  psi_clip: 30\n  bounds:\n    age: [18, 100]\n    y: [-1.5, 40]\nlimits:\n  min_batch: 64\n  rounds: 500\n  kernels: 3\n  sites: 20\n  candidates: 30\n  transfers: [learned, none]\nfederation:\n  tls:\n    ca: tls/ca.crt\n    crl: tls/revoked.crl\n"
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := execute(t, "version", "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.conf().Privacy()
	if err != nil || p == nil || p.Epsilon != 8 || p.RunEpsilon != 2 || p.Delta != 1e-6 || p.Clip != 0.5 || p.PsiClip != 30 ||
		len(p.Bounds) != 2 || p.Bounds["age"] != (federation.Bound{Lo: 18, Hi: 100}) || p.Bounds["y"] != (federation.Bound{Lo: -1.5, Hi: 40}) {
		t.Errorf("privacy from the file: %+v, %v", p, err)
	}
	l, err := a.conf().Limits()
	if err != nil || l.MinBatch != 64 || l.Rounds != 500 || l.Kernels != 3 || l.Sites != 20 || l.Candidates != 30 || len(l.Transfers) != 2 ||
		l.Features != federation.DefaultLimits().Features {
		t.Errorf("limits from the file: %+v, %v", l, err)
	}
	if c := a.conf().Transport(transport.RoleSite, "s1"); c.TLS.CRL != filepath.Join(dir, "tls", "revoked.crl") {
		t.Errorf("federation.tls.crl from the file: %q", c.TLS.CRL)
	}

	t.Setenv("CRFFD_PRIVACY_EPSILON", "4")
	t.Setenv("CRFFD_PRIVACY_CLIP", "2")
	t.Setenv("CRFFD_LIMITS_MIN_BATCH", "1024")
	t.Setenv("CRFFD_LIMITS_KERNELS", "5")
	t.Setenv("CRFFD_LIMITS_SITES", "50")
	t.Setenv("CRFFD_LIMITS_CANDIDATES", "100")
	t.Setenv("CRFFD_LIMITS_TRANSFERS", "full")
	t.Setenv("CRFFD_FEDERATION_TLS_CRL", "other.crl")
	t.Setenv("CRFFD_PRIVACY_BOUNDS_AGE", "0, 120")
	t.Setenv("CRFFD_PRIVACY_BOUNDS_SCORE", "-5,5")
	t.Setenv("CRFFD_PRIVACY_PSI_CLIP", "12")
	if p, err := a.conf().Privacy(); err != nil || p.Epsilon != 4 || p.Clip != 2 || p.RunEpsilon != 2 || p.PsiClip != 12 || len(p.Bounds) != 3 ||
		p.Bounds["age"] != (federation.Bound{Lo: 0, Hi: 120}) || p.Bounds["score"] != (federation.Bound{Lo: -5, Hi: 5}) {
		t.Errorf("privacy from the environment: %+v, %v", p, err)
	}
	if l, err := a.conf().Limits(); err != nil || l.MinBatch != 1024 || l.Kernels != 5 || l.Sites != 50 || l.Candidates != 100 ||
		len(l.Transfers) != 1 || l.Transfers[0] != estimator.FullTransfer {
		t.Errorf("limits from the environment: %+v, %v", l, err)
	}
	if c := a.conf().Transport(transport.RoleSite, "s1"); c.TLS.CRL != filepath.Join(dir, "other.crl") {
		t.Errorf("federation.tls.crl from the environment: %q", c.TLS.CRL)
	}
}

// TestPolicyThresholds: site.policy_thresholds reads as distinct finite
// numbers, at most config.MaxPolicyThresholds, from the file or the
// environment.
func TestPolicyThresholds(t *testing.T) {
	read := func(t *testing.T, file string, env ...string) ([]float64, error) {
		for i := 0; i < len(env); i += 2 {
			t.Setenv(env[i], env[i+1])
		}
		a, err := execute(t, "version", "--config", writeConfig(t, file))
		if err != nil {
			t.Fatal(err)
		}
		return a.conf().PolicyThresholds()
	}
	many := strings.Repeat("1,", 16) + "1"
	for _, tc := range []struct {
		file, env, want, err string
	}{
		{"", "", "[0]", ""},
		{"site:\n  policy_thresholds: [0, 1.5, -2]\n", "", "[0 1.5 -2]", ""},
		{"site:\n  policy_thresholds: []\n", "", "[]", ""},
		{"", "0.5,2", "[0.5 2]", ""},
		{"site:\n  policy_thresholds: [0, one]\n", "", "", `site.policy_thresholds: "one" is not a number`},
		{"site:\n  policy_thresholds: [1, 1]\n", "", "", "site.policy_thresholds: 1 listed twice"},
		{"", "NaN", "", `"NaN" is not a number`},
		{"", many, "", "listed twice"},
	} {
		t.Run("", func(t *testing.T) {
			var env []string
			if tc.env != "" {
				env = []string{"CRFFD_SITE_POLICY_THRESHOLDS", tc.env}
			}
			got, err := read(t, tc.file, env...)
			if tc.err == "" && (err != nil || fmt.Sprint(got) != tc.want) || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("%q, env %q: %v, %v; want %s %q", tc.file, tc.env, got, err, tc.want, tc.err)
			}
		})
	}
	var distinct []string
	for i := range 17 {
		distinct = append(distinct, fmt.Sprint(i))
	}
	if _, err := read(t, "", "CRFFD_SITE_POLICY_THRESHOLDS", strings.Join(distinct, ",")); err == nil || !strings.Contains(err.Error(), "17 thresholds, at most 16") {
		t.Errorf("17 thresholds: %v", err)
	}
}

// TestNewSwitchesFromFileAndEnvironment: model.selection_by_site and
// privacy.nuisance_statistics (no flag sets either) are read from the
// file, and the environment overrides the file.
func TestNewSwitchesFromFileAndEnvironment(t *testing.T) {
	read := func(t *testing.T, file string) (bool, bool) {
		t.Helper()
		a, err := execute(t, "version", "--config", writeConfig(t, file))
		if err != nil {
			t.Fatal(err)
		}
		c, err := a.choiceSettings(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		p, err := a.conf().Privacy()
		if err != nil || p == nil {
			t.Fatalf("privacy %+v, %v", p, err)
		}
		return c.BySite, p.NuisanceStatistics
	}
	const private = "privacy:\n  epsilon: 4\n  bounds:\n    y: [-5, 25]\n"
	if bySite, stats := read(t, private); !bySite || stats {
		t.Errorf("defaults: selection_by_site %v, nuisance_statistics %v; want on and off", bySite, stats)
	}
	if bySite, stats := read(t, "model:\n  selection_by_site: false\nprivacy:\n  epsilon: 4\n  nuisance_statistics: true\n  bounds:\n    y: [-5, 25]\n"); bySite || !stats {
		t.Errorf("file: selection_by_site %v, nuisance_statistics %v; want off and on", bySite, stats)
	}
	t.Setenv("CRFFD_MODEL_SELECTION_BY_SITE", "false")
	t.Setenv("CRFFD_PRIVACY_NUISANCE_STATISTICS", "true")
	if bySite, stats := read(t, private); bySite || !stats {
		t.Errorf("environment: selection_by_site %v, nuisance_statistics %v; want off and on", bySite, stats)
	}
}

// TestSubgroupSettingsFromFileAndEnvironment: site.subgroups (deny by
// default, allow, or names) and coordinator.subgroups are read from the
// file, and site.subgroups from the environment too; no flag sets them.
func TestSubgroupSettingsFromFileAndEnvironment(t *testing.T) {
	policy := func(t *testing.T, file string) federation.SubgroupPolicy {
		t.Helper()
		a, err := execute(t, "version", "--config", writeConfig(t, file))
		if err != nil {
			t.Fatal(err)
		}
		p, err := a.conf().SubgroupPolicy()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := policy(t, "log_level: info\n"); p.Any || p.Names != nil {
		t.Errorf("default: %+v, want deny", p)
	}
	if p := policy(t, "site:\n  subgroups: allow\n"); !p.Any {
		t.Errorf("file, allow: %+v", p)
	}
	if p := policy(t, "site:\n  subgroups: [old, women]\n"); p.Any || !slices.Equal(p.Names, []string{"old", "women"}) {
		t.Errorf("file, names: %+v", p)
	}
	t.Setenv("CRFFD_SITE_SUBGROUPS", "old,women")
	if p := policy(t, "site:\n  subgroups: deny\n"); !slices.Equal(p.Names, []string{"old", "women"}) {
		t.Errorf("environment: %+v, want the names", p)
	}
	a, err := execute(t, "version", "--config", writeConfig(t, "coordinator:\n  sites: [a, b]\n  subgroups:\n    - {name: old, predicate: age >= 65}\nfederation:\n  address: 127.0.0.1:1\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.conf().Coordinator(true)
	if err != nil {
		t.Fatal(err)
	}
	if want := []federation.Subgroup{{Name: "old", Predicate: "age >= 65"}}; !slices.Equal(c.Run.Subgroups, want) {
		t.Errorf("coordinator.subgroups %+v, want %+v", c.Run.Subgroups, want)
	}
}
