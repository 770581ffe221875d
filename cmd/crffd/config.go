package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/crffd/crffd/config"
	"github.com/crffd/crffd/internal/profile"
)

// app is the state shared by all commands of one invocation.
type app struct {
	v      *viper.Viper
	stdout io.Writer
	stderr io.Writer
	log    *slog.Logger
	// configFile is the --config path, against which relative paths in
	// the configuration are resolved.
	configFile string
	profile    *profile.Run // the profiles --cpu-profile, --mem-profile and --peak-heap-profile ask for, while the command runs
}

// load builds the configuration of cmd: defaults, then the YAML file named
// by --config, then CRFFD_ environment variables, then flags, each
// overriding the one before.
func (a *app) load(cmd *cobra.Command) error {
	v := config.NewViper()
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
		if err := config.CheckKeys(v, path); err != nil {
			return err
		}
		a.configFile = path
	}
	a.v = v
	logger, err := config.NewLogger(a.stderr, v.GetString("log_level"), v.GetString("log_format"))
	if err != nil {
		return err
	}
	a.log = logger
	return nil
}

// configKey is the flag annotation naming the configuration key a flag sets.
const configKey = "crffd_config_key"

// bindFlag marks flag name of fs as the command-line form of key.
func bindFlag(fs *pflag.FlagSet, name, key string) {
	_ = fs.SetAnnotation(name, configKey, []string{key})
}

// pluginDir returns the configured plugin directory or the default.
func (a *app) pluginDir() (string, error) { return a.conf().PluginDir() }

// conf reads the typed settings of this invocation's configuration.
func (a *app) conf() config.Reader { return config.Reader{V: a.v, File: a.configFile} }
