package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cast"
	"github.com/spf13/pflag"

	"github.com/crffd/crffd/config"
)

// showConfig runs crffd config show with args and returns, by key, the
// value and origin it prints.
func showConfig(t *testing.T, args ...string) map[string][2]string {
	t.Helper()
	a, err := execute(t, append([]string{"config", "show"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]string{}
	lines := strings.Split(strings.TrimSpace(a.stdout.(*bytes.Buffer).String()), "\n")
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		switch len(f) {
		case 2:
			out[f[0]] = [2]string{"", f[1]}
		case 3:
			out[f[0]] = [2]string{f[1], f[2]}
		default:
			t.Fatalf("config show line %q", l)
		}
	}
	return out
}

// yamlFor is a configuration file setting the dotted key to value.
func yamlFor(key, value string) string {
	parts := strings.Split(key, ".")
	var b strings.Builder
	for i, p := range parts {
		b.WriteString(strings.Repeat("  ", i) + p + ":")
		if i < len(parts)-1 {
			b.WriteString("\n")
		}
	}
	return b.String() + " " + value + "\n"
}

// layerSamples are, for setting s, a value for the file and one for the
// environment, and what config show prints for each (the environment's
// printed over the file's).
func layerSamples(s config.Setting) (file, env, wantFile, wantEnv string) {
	switch s.Key {
	case "log_level":
		return "warn", "error", "warn", "error"
	case "log_format":
		return "json", "text", "json", "text"
	}
	switch s.Default.(type) {
	case int:
		return "11", "12", "11", "12"
	case float64:
		return "0.75", "0.5", "0.75", "0.5"
	case []string:
		return "[a, b]", "c d", "a,b", "c,d"
	case map[string]string, map[string]float64:
		// The environment adds an entry to the file's.
		return "{k1: 1.5}", "2.5", "k1=1.5", "k1=1.5,k2=2.5"
	}
	return "from-file", "from-env", "from-file", "from-env"
}

// TestEveryKeyThroughEveryLayer walks every key of the registry (settings,
// from which docs/configuration.md's table is generated) through the layers: its
// documented default, the file, the environment over the file, and for
// the keys with a flag, the flag over the environment, as crffd config show
// reads them the way the commands do (lists split, map entries from the
// file and the environment merged).
func TestEveryKeyThroughEveryLayer(t *testing.T) {
	flags := map[string]string{"plugin_dir": "--plugin-dir", "log_level": "--log-level", "log_format": "--log-format"}
	flagValues := map[string]string{"plugin_dir": "/from/flag", "log_level": "debug", "log_format": "json"}
	// Every flag bound to a key has its case above.
	rootCmd(&app{}).PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if k := f.Annotations[configKey]; len(k) == 1 && flags[k[0]] != "--"+f.Name {
			t.Errorf("flag --%s sets %s, which the walk does not try", f.Name, k[0])
		}
	})
	for _, s := range config.Settings {
		t.Run(s.Key, func(t *testing.T) {
			file, env, wantFile, wantEnv := layerSamples(s)
			want := func(got map[string][2]string, value, origin string) {
				t.Helper()
				if got[s.Key] != [2]string{value, origin} {
					t.Errorf("%s: %q from %s, want %q from %s", s.Key, got[s.Key][0], got[s.Key][1], value, origin)
				}
			}
			def := cast.ToString(s.Default)
			if v, ok := s.Default.([]string); ok {
				def = strings.Join(v, ",")
			}
			if config.SecretKeys[s.Key] {
				def, wantFile, wantEnv = "(empty)", "(set)", "(set)"
			}
			want(showConfig(t), def, config.OriginDefault)
			path := writeConfig(t, yamlFor(s.Key, file))
			want(showConfig(t, "--config", path), wantFile, config.OriginFile)
			variable := config.EnvName(s.Key)
			if config.IsMap(s.Default) {
				variable += "_K2"
			}
			t.Setenv(variable, env)
			want(showConfig(t, "--config", path), wantEnv, config.OriginEnv)
			if flag := flags[s.Key]; flag != "" {
				want(showConfig(t, "--config", path, flag, flagValues[s.Key]), flagValues[s.Key], config.OriginFlag)
			}
		})
	}
}

// TestConfigShowOrigins: the origin config show prints is the layer whose
// value it prints, also for an empty variable, which crffd (like viper)
// reads as unset, and for several layers set at once.
func TestConfigShowOrigins(t *testing.T) {
	file := "log_level: warn\nsite:\n  db: site1.sqlite\n  covariates: [age, score]\nmodel:\n  seed: 3\n  rounds: 9\n"
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want map[string][2]string
	}{
		{"file and defaults", nil, nil, map[string][2]string{
			"model.seed": {"3", config.OriginFile}, "site.covariates": {"age,score", config.OriginFile},
			"model.features": {"200", config.OriginDefault}, "log_level": {"warn", config.OriginFile}}},
		{"one variable over the file", map[string]string{"CRFFD_MODEL_SEED": "7"}, nil, map[string][2]string{
			"model.seed": {"7", config.OriginEnv}, "model.rounds": {"9", config.OriginFile}}},
		{"empty variables are unset", map[string]string{"CRFFD_MODEL_SEED": "", "CRFFD_SITE_DB": "", "CRFFD_SITE_COVARIATES": "", "CRFFD_SITE_TABLE": ""}, nil, map[string][2]string{
			"model.seed": {"3", config.OriginFile}, "site.db": {"site1.sqlite", config.OriginFile},
			"site.covariates": {"age,score", config.OriginFile}, "site.table": {"records", config.OriginDefault}}},
		{"list from a variable", map[string]string{"CRFFD_SITE_COVARIATES": "age sex"}, nil, map[string][2]string{
			"site.covariates": {"age,sex", config.OriginEnv}}},
		{"flag over variable over file", map[string]string{"CRFFD_LOG_LEVEL": "error", "CRFFD_LOG_FORMAT": "json"}, []string{"--log-level", "debug"}, map[string][2]string{
			"log_level": {"debug", config.OriginFlag}, "log_format": {"json", config.OriginEnv}}},
		{"flag with the default's value", nil, []string{"--log-format=text"}, map[string][2]string{
			"log_format": {"text", config.OriginFlag}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			got := showConfig(t, append([]string{"--config", writeConfig(t, file)}, tc.args...)...)
			for key, want := range tc.want {
				if got[key] != want {
					t.Errorf("%s: %q from %s, want %q from %s", key, got[key][0], got[key][1], want[0], want[1])
				}
			}
		})
	}
}
