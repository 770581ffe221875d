package main

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cast"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/crffd/crffd/plugins/host"
)

// envPrefix prefixes every environment variable crffd reads.
const envPrefix = "CRFFD"

// setting is one configuration key. Every key crffd reads is listed in
// settings, which is the single source of the defaults, the environment
// variable names and the configuration reference.
type setting struct {
	Key     string
	Default any
	Usage   string
}

// settings lists every key, gathered from the files that own them.
var settings = slices.Concat(globalSettings, siteSettings, modelSettings, federationSettings, privacySettings)

var globalSettings = []setting{
	{"plugin_dir", "", "directory holding the plugin executables; empty means the folder of the crffd executable"},
	{"plugin_sha256", map[string]string{}, "SHA-256 pins by plugin file name, e.g. crff-kernel-gaussian: <64 hex digits>; a binary that differs is refused"},
	{"log_level", "info", "debug, info, warn or error"},
	{"log_format", "text", "text or json (slog handlers, written to standard error)"},
}

// envName returns the environment variable that sets key.
func envName(key string) string {
	return envPrefix + "_" + strings.ToUpper(envReplacer.Replace(key))
}

var envReplacer = strings.NewReplacer(".", "_", "-", "_")

// app is the state shared by all commands of one invocation.
type app struct {
	v      *viper.Viper
	stdout io.Writer
	stderr io.Writer
	log    *slog.Logger
	// configFile is the --config path, against which relative paths in
	// the configuration are resolved.
	configFile string
	profile    *os.File // the --cpu-profile file while the profile runs
}

// load builds the configuration of cmd: defaults, then the YAML file named
// by --config, then CRFFD_ environment variables, then flags, each
// overriding the one before.
func (a *app) load(cmd *cobra.Command) error {
	v := viper.New()
	for _, s := range settings {
		v.SetDefault(s.Key, s.Default)
	}
	v.SetEnvPrefix(envPrefix)
	v.SetEnvKeyReplacer(envReplacer)
	v.AutomaticEnv()
	var bindErr error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if key := f.Annotations[configKey]; len(key) == 1 && bindErr == nil {
			bindErr = v.BindPFlag(key[0], f)
		}
	})
	if bindErr != nil {
		return bindErr
	}
	if path, _ := cmd.Flags().GetString("config"); path != "" {
		v.SetConfigFile(path)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			return fmt.Errorf("read config %q: %w", path, err)
		}
		if err := checkKeys(v, path); err != nil {
			return err
		}
		a.configFile = path
	}
	a.v = v
	logger, err := newLogger(a.stderr, v.GetString("log_level"), v.GetString("log_format"))
	if err != nil {
		return err
	}
	a.log = logger
	return nil
}

// checkKeys refuses a configuration file holding a key crffd does not
// know, which is most often a typo that would otherwise be ignored.
func checkKeys(v *viper.Viper, path string) error {
	known := map[string]bool{}
	maps := map[string]bool{}
	for _, s := range settings {
		known[s.Key] = true
		if isMap(s.Default) {
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

// configKey is the flag annotation naming the configuration key a flag sets.
const configKey = "crffd_config_key"

// bindFlag marks flag name of fs as the command-line form of key.
func bindFlag(fs *pflag.FlagSet, name, key string) {
	_ = fs.SetAnnotation(name, configKey, []string{key})
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log_level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log_format %q: want text or json", format)
}

// pluginDir returns the configured plugin directory or the default.
func (a *app) pluginDir() (string, error) {
	if d := a.v.GetString("plugin_dir"); d != "" {
		return d, nil
	}
	return host.DefaultDir()
}

// pin returns the configured SHA-256 pin of a plugin file, or "".
func (a *app) pin(kind, name string) string {
	file := host.FileName(kind, name)
	if p := os.Getenv(envName("plugin_sha256." + file)); p != "" {
		return p
	}
	return a.v.GetStringMapString("plugin_sha256")[strings.ToLower(file)]
}

// stringMap returns the map-valued key: the entries of the file (or a
// flag), with the entries the environment sets (envMap) added or
// replacing them. It is the one reader of map-valued keys. A list value
// of the file (privacy.bounds: {age: [18, 100]}) reads as its entries
// joined by commas, as the environment gives it ("18,100").
func (a *app) stringMap(key string) map[string]string {
	m := map[string]string{}
	for k, v := range a.v.GetStringMap(key) {
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
	maps.Copy(m, envMap(key))
	return m
}

// envMap returns the entries of map key set in the environment: for every
// variable envName(key)_NAME, NAME lower-cased and its value. Viper sees
// only the keys it knows, so the free keys of a map are read here.
func envMap(key string) map[string]string {
	prefix := envName(key) + "_"
	out := map[string]string{}
	for _, kv := range os.Environ() {
		name, v, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(name, prefix) && len(name) > len(prefix) {
			out[strings.ToLower(name[len(prefix):])] = v
		}
	}
	return out
}

// isMap reports whether a setting's default is a map, whose keys are free.
func isMap(v any) bool {
	switch v.(type) {
	case map[string]string, map[string]float64:
		return true
	}
	return false
}
