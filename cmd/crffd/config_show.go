package main

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func newConfigCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Inspect the configuration",
		Args:  cobra.NoArgs,
	}
	show := &cobra.Command{
		Use:   "show [--config FILE]",
		Short: "Print every configuration key's effective value and where it came from",
		Long: `show prints every key crffd reads, with the value a command given the same
--config, environment and flags would use, and its origin: flag, env (a CRFFD_
variable), file (the --config file) or default. The flags it knows are the
global ones (--plugin-dir, --log-level, --log-format); a command's own flags,
such as fit's --db, are not read here. An empty CRFFD_ variable counts as
unset, as it does for every command. Relative paths (site.db,
coordinator.state_db, federation.tls.*) are printed as written; commands
read them relative to the --config file's folder. Secrets are shown as
"(set)".`,
		Example: `  crffd config show --config hospital-a.yaml

  # which layer wins: model.seed from the environment, log_level from the flag
  CRFFD_MODEL_SEED=7 crffd config show --config demo/site1.yaml --log-level debug`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tVALUE\tORIGIN")
			for _, s := range settings {
				v, origin := a.effective(cmd, s)
				fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Key, v, origin)
			}
			return tw.Flush()
		},
	}
	cmd.AddCommand(show)
	return cmd
}

// Origins of an effective configuration value, from the strongest layer.
const (
	originFlag    = "flag"
	originEnv     = "env"
	originFile    = "file"
	originDefault = "default"
)

// secretKeys are shown as "(set)" or "(empty)", never their value.
var secretKeys = map[string]bool{"federation.secret": true}

// effective returns the value of s that crffd's commands read, formatted,
// and the layer it came from. It reads each key the way the commands do:
// lists with stringList, maps as the file's entries with the environment's
// (envMap) over them, everything else through viper, whose precedence is
// flag, environment, file, default.
func (a *app) effective(cmd *cobra.Command, s setting) (string, string) {
	origin := originDefault
	switch {
	case flagChanged(cmd, s.Key):
		origin = originFlag
	case envSet(s):
		origin = originEnv
	case a.v.InConfig(s.Key):
		origin = originFile
	}
	var v string
	switch s.Default.(type) {
	case []string:
		v = strings.Join(a.stringList(s.Key), ",")
	case map[string]string, map[string]float64:
		m := a.stringMap(s.Key)
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, k+"="+m[k])
		}
		v = strings.Join(parts, ",")
	default:
		v = a.v.GetString(s.Key)
	}
	if secretKeys[s.Key] {
		v = "(empty)"
		if a.v.GetString(s.Key) != "" {
			v = "(set)"
		}
	}
	return v, origin
}

// envSet reports whether the environment sets s: its variable, or for a
// map any of its entries' variables. An empty variable sets nothing, as
// viper (without AllowEmptyEnv) reads it.
func envSet(s setting) bool {
	if os.Getenv(envName(s.Key)) != "" {
		return true
	}
	return isMap(s.Default) && len(envMap(s.Key)) > 0
}

// flagChanged reports whether a flag of cmd bound to key was given.
func flagChanged(cmd *cobra.Command, key string) bool {
	changed := false
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if k := f.Annotations[configKey]; len(k) == 1 && k[0] == key && f.Changed {
			changed = true
		}
	})
	return changed
}
