package main

import (
	"io"

	"github.com/spf13/cobra"
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
			return a.load(cmd)
		},
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	pf := root.PersistentFlags()
	pf.String("config", "", "YAML configuration file")
	pf.String("plugin-dir", "", "directory holding the plugin executables (default: beside crffd)")
	pf.String("log-level", "info", "log level: debug, info, warn or error")
	pf.String("log-format", "text", "log format: text or json")
	bindFlag(pf, "plugin-dir", "plugin_dir")
	bindFlag(pf, "log-level", "log_level")
	bindFlag(pf, "log-format", "log_format")

	root.AddCommand(newVersionCmd(a), newKernelsCmd(a), newSimulateCmd(a), newEvalCmd(a), newImportCmd(a), newCertsCmd(a), newFitCmd(a), newSiteCmd(a), newCoordinatorCmd(a), newDemoCmd(a), newReportCmd(a), newConfigCmd(a))
	return root
}
