package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/sandbox/demo"
)

func newDemoCmd(a *app) *cobra.Command {
	cfg := demo.Config{Rows: 1000, Seed: 1}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a whole federation on simulated data: three sites and a coordinator over loopback",
		Long: `demo simulates three sites of the paper's synthetic design (the third
dissimilar, Δ = 4) into a fresh folder, makes a federation CA and certificates,
starts a coordinator and three site daemons as separate processes talking grpc
over mutual TLS on loopback with the Gaussian kernel plugin, trains, scores, and
prints the local and global ATEs, the errors against the simulated truth, the
learned transfer factors. It stops every process it started, and removes the
folder it made under the system's temporary folder unless --keep (or --dir)
asks to keep it, in which case it prints SQL to look at the results. A demo
that fails keeps its folder, with the daemons' logs.`,
		Example: `  crffd demo
  crffd demo --keep              # keep the SQLite files, logs and certificates to look at
  crffd demo --dir demo-run --rows 300`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if cfg.PluginDir, err = a.pluginDir(); err != nil {
				return err
			}
			if cfg.Executable, err = os.Executable(); err != nil {
				return fmt.Errorf("demo: %w", err)
			}
			return demo.Run(cmd.Context(), cfg, a.stdout)
		},
	}
	cmd.Flags().StringVar(&cfg.Dir, "dir", "", "folder to write the demo into (default: a fresh folder under the system's temporary folder)")
	cmd.Flags().IntVar(&cfg.Rows, "rows", cfg.Rows, "rows per site")
	cmd.Flags().Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the simulated data")
	cmd.Flags().BoolVar(&cfg.Keep, "keep", false, "keep the demo's temporary folder (a --dir is always kept)")
	return cmd
}
