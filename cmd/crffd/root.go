package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/internal/profile"
)

// newRootCmd assembles the command tree. Each subcommand lives in its own
// file and only wires packages together.
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	return rootCmd(&app{stdout: stdout, stderr: stderr})
}

func rootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:           "crffd",
		Short:         "Federated estimation of heterogeneous causal effects (CausalRFF)",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.load(cmd); err != nil {
				return err
			}
			return a.startProfile(cmd)
		},
		PersistentPostRunE: func(*cobra.Command, []string) error { return a.stopProfile() },
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	pf := root.PersistentFlags()
	pf.String("config", "", "YAML configuration file")
	pf.String("plugin-dir", "", "directory holding the plugin executables (default: beside crffd)")
	pf.String("log-level", "info", "log level: debug, info, warn or error")
	pf.String("log-format", "text", "log format: text or json")
	pf.String("cpu-profile", "", "write a CPU profile of the command to this file (go tool pprof reads it)")
	pf.String("mem-profile", "", "write a profile of the memory the command allocated to this file when it ends (go tool pprof reads it)")
	pf.String("peak-heap-profile", "", "write the heap in use when the live heap was at its largest to this file (go tool pprof reads it)")
	bindFlag(pf, "plugin-dir", "plugin_dir")
	bindFlag(pf, "log-level", "log_level")
	bindFlag(pf, "log-format", "log_format")

	root.AddCommand(newVersionCmd(a), newKernelsCmd(a), newSimulateCmd(a), newEvalCmd(a), newImportCmd(a), newCertsCmd(a), newKitCmd(a), newCheckCmd(a), newFitCmd(a), newSiteCmd(a), newCoordinatorCmd(a), newDemoCmd(a), newReportCmd(a), newConfigCmd(a), newPrivacyCmd(a))
	return root
}

// startProfile starts the profiles --cpu-profile, --mem-profile and
// --peak-heap-profile name.
func (a *app) startProfile(cmd *cobra.Command) error {
	var paths profile.Paths
	paths.CPU, _ = cmd.Flags().GetString("cpu-profile")
	paths.Mem, _ = cmd.Flags().GetString("mem-profile")
	paths.Peak, _ = cmd.Flags().GetString("peak-heap-profile")
	var err error
	a.profile, err = profile.Start(paths)
	return err
}

// stopProfile ends the profiles startProfile began.
func (a *app) stopProfile() error {
	err := a.profile.Stop()
	a.profile = nil
	return err
}
