package main

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/config"
	"github.com/crffd/crffd/sandbox"
	"github.com/crffd/crffd/synth"
)

func newSimulateCmd(a *app) *cobra.Command {
	o := config.DefaultSimulateOptions()
	cmd := &cobra.Command{
		Use:   "simulate --out DIR",
		Short: "Write simulated data: the paper's synthetic design (Sec. 5.1) or a simple known-truth design",
		Long: `simulate draws sources from a synthetic design with known effects. The default,
--design paper, is the synthetic design of the CausalRFF paper: a latent class z
over five classes, 30 binary proxies x1..x30, a treatment and outcomes that
depend on z, and a shift Δ per source (--binary-outcome: crffd's binary variant).

The simple designs have three covariates, age ~ N(50, 10²), sex ~ Bern(0.5) and
score ~ N(Δ, 1) (Δ, the source's shift, moves the mean of score), and a
treatment confounded by age and score: with a = (age - 50)/10,
w ~ Bern(σ(0.8·a + 0.8·score)), treated share 0.5 at Δ = 0. Then, with
independent noise ε0, ε1 ~ N(0, 1) for the two potential outcomes:
  linear-constant  mu0 = 1 + a + 0.5·sex + 1.5·score, mu1 = mu0 + 2,
                   y(w) = mu_w + ε_w; true CATE 2 in every row, ATE 2
  linear-varying   the same mu0, mu1 = mu0 + 1.5 + sex + score,
                   y(w) = mu_w + ε_w; true ATE 2 + Δ (2 at Δ = 0)
  lognormal        m = 0.3·a + 0.2·sex + 0.5·score,
                   y(w) = exp(m + 0.75·w + 0.8·ε_w), mu_w = exp(m + 0.75·w + 0.32);
                   true ATE 2.0251·e^(Δ/2) (2.0251 at Δ = 0)
  binary           η = -0.5 + 0.5·a + 0.3·sex + 0.8·score, mu0 = σ(η),
                   mu1 = σ(η + 1), y(w) ~ Bern(mu_w); true ATE 0.2060 at Δ = 0
  rough            the linear mu0, mu1 = mu0 + 2 + r(score), r a rough
                   (Matérn-½, lengthscale 0.25) random function drawn from
                   --seed; the true ATE is the mean of mu1 - mu0 of the rows
The true ATE is the population mean of mu1 - mu0; the package documentation of
synth gives the derivations (go doc github.com/crffd/crffd/synth).

With --format csv it writes one file per replicate, synth_1.csv, synth_2.csv,
..., in the IHDP layout (w, y, y_cfactual, mu0, mu1, then the covariates:
x1..x30, or age, sex, score; no header) with the sources as consecutive blocks
of --rows rows, ready for crffd eval --source-size ROWS. With --format sqlite it
writes one site file per source, siteK.sqlite, holding the table records (id, w,
y, then the covariates by name: x1..x30, or age, sex, score) and the table truth
(id, mu0, mu1, y_cfactual), and beside it siteK.yaml, a ready single-site
configuration for crffd fit. With --federation it also writes a local sandbox
federation: certs/ (a CA and one certificate folder per daemon),
coordinator.yaml, and a federation section in every siteK.yaml, wired for the
grpc transport over loopback on free ports, so that
  crffd coordinator --config DIR/coordinator.yaml --once
  crffd site --config DIR/siteK.yaml --once     (for each K)
started in any order complete a federated run.`,
		Example: `  # one site, as a SQLite file with its configuration
  crffd simulate --sources 1 --format sqlite --out demo/

  # a federation of three sites on loopback, with certificates
  crffd simulate --sources 3 --format sqlite --federation --out syn/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSimulate(cmd.Context(), a, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Design, "design", o.Design, "design: "+strings.Join(synth.DesignNames(), ", ")+" (see above)")
	f.IntVar(&o.Sources, "sources", o.Sources, "number of sources")
	f.IntVar(&o.Rows, "rows", o.Rows, "rows per source")
	f.IntVar(&o.Replicates, "replicates", o.Replicates, "number of replicates (files), each with its own seed")
	f.StringVar(&o.Delta, "delta", "", "shift Δ per source: one value for all, or a comma-separated list (default 0); in the simple designs the mean of score")
	f.StringVar(&o.DeltaUniform, "delta-uniform", "", "draw Δ per source from U[LO,HI], e.g. 0,8 (the paper's large setting)")
	f.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the first replicate; replicate k uses seed+k-1")
	f.BoolVar(&o.Binary, "binary-outcome", false, "binary outcomes (crffd's own variant of the paper's design; for a simple design use --design binary)")
	f.StringVar(&o.Format, "format", o.Format, "output format: csv (IHDP layout) or sqlite (siteK.sqlite and siteK.yaml per source)")
	f.StringVar(&o.Out, "out", "", "output directory (created if missing)")
	f.BoolVar(&o.Federation, "federation", false, "with --format sqlite: also write a federation CA and certificates, coordinator.yaml and siteK.yaml wired for grpc over loopback on free ports")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

func runSimulate(ctx context.Context, a *app, o config.SimulateOptions) error {
	sim, err := o.Simulation()
	if err != nil {
		return err
	}
	return sandbox.Simulate(ctx, sim, a.stdout)
}
