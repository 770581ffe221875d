package main

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/privacy/audit"
)

func newPrivacyCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "privacy",
		Short: "Check a site's differential privacy",
	}
	cmd.AddCommand(newPrivacyAuditCmd(a))
	return cmd
}

func newPrivacyAuditCmd(a *app) *cobra.Command {
	var rows int
	var seed uint64
	cmd := &cobra.Command{
		Use:   "audit --config SITE.yaml [--rows K]",
		Short: "Measure, on the site's own rows, the sensitivity the privacy accountant assumes",
		Long: `audit checks the assumption behind the ε that crff_privacy reports. The
accountant charges each private training round as the Gaussian mechanism on a
sum of per-row gradients clipped to privacy.clip (C): adding or removing one
row must move that sum by at most C, and replacing a row by another by at
most 2C, whatever the other rows are.

For each model (propensity, outcome, latent) and batch mode (every row, and
the Poisson sample of rate B/n a private site draws when model.batch_size is
below its rows), audit takes K of the site's rows in turn and computes the
round's clipped sum with the noise off, at one setup, input and round: on
the rows D, on D without the row (add/remove), and on D with the row
replaced by another of the site's rows (replace-one). It prints the largest
‖M(D) − M(D′)‖/C of each relation beside the bound the accountant assumes,
and exits with status 1 when any ratio exceeds it. It audits the same way the
sufficient statistics from which a private site fits its AIPW's nuisance
models, whose sensitivity is d + 2 for d covariates. Nothing leaves the site,
and nothing is written to the file but crffd's own tables, which any crffd
command creates on first opening it.`,
		Example: `  crffd privacy audit --config hospital-a.yaml --rows 50`,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return runPrivacyAudit(cmd.Context(), a, rows, seed) },
	}
	f := cmd.Flags()
	f.IntVar(&rows, "rows", 20, "how many of the site's rows to remove and replace in turn (K)")
	f.Uint64Var(&seed, "seed", 1, "draws the audited rows, their replacements and the round's weights")
	addRecordFlags(cmd)
	return cmd
}

// runPrivacyAudit audits, on rows of the site's rows drawn with seed, the
// sensitivity of private training (package audit).
func runPrivacyAudit(ctx context.Context, a *app, rows int, seed uint64) error {
	src, err := a.conf().SiteSource()
	if err != nil {
		return err
	}
	cfg, err := a.conf().Model()
	if err != nil {
		return err
	}
	// A private site trains with Adam; the setup's optimiser
	// does not enter a round's gradient.
	cfg.Method = estimator.Adam
	clip := a.v.GetFloat64("privacy.clip")
	db, recs, err := a.openRecords(ctx, src)
	if err != nil {
		return err
	}
	defer db.Close()
	ch, err := a.choiceSettings(ctx)
	if err != nil {
		return err
	}
	spectral, err := a.openSpectral(ctx, ch.Kernels[0])
	if err != nil {
		return err
	}
	scaler, err := estimator.NewScaler(recs.Schema, []estimator.Moments{recs.Data.Moments()})
	if err != nil {
		return err
	}
	setup, err := estimator.NewSetup(ctx, recs.Schema, spectral, cfg, scaler)
	if err != nil {
		return err
	}
	q := federation.SamplingRate(cfg, recs.Len())
	opts := audit.Options{Clip: clip, Rows: rows, Seed: seed}
	if q < 1 {
		opts.Rate = q
	}
	a.log.Info("auditing the sensitivity of private training", slog.String(logKeyDB, src.DB), slog.Int(logKeyRows, recs.Len()),
		slog.Int("audited_rows", min(rows, recs.Len())), slog.Float64("sampling_rate", q))
	res, err := audit.Run(ctx, recs.Data, setup, opts)
	if err != nil {
		return err
	}
	return audit.WriteText(a.stdout, res, recs.IDs, clip)
}
