package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/crffd/crffd/config"
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
			for _, s := range config.Settings {
				v, origin := a.conf().Effective(s, flagChanged(cmd, s.Key))
				fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Key, v, origin)
			}
			return tw.Flush()
		},
	}
	cmd.AddCommand(show)
	return cmd
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
