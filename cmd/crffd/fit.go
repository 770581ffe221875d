package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/internal/mapped"
	"github.com/crffd/crffd/pipeline"
	"github.com/crffd/crffd/progress"
	"github.com/crffd/crffd/store"
)

func newFitCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fit --config SITE.yaml | --db FILE --table NAME ...",
		Short: "Fit one site alone (no coordinator): train, score every row, write the views",
		Long: `fit reads the site's records through the configured table or view, validates
them, trains the three CausalRFF models on them, scores every row and publishes
the results in the site file, replacing any earlier run's in one transaction:
crff_cate (per row), crff_ate (local ATE), crff_cate_records (your rows joined
to their effects). It prints the local ATE: the doubly robust (AIPW) estimate
with its 95% interval, whose propensity and outcome models are cross-fitted
over model.folds folds of the rows, and the mean of the CausalRFF CATEs (the
paper's plug-in estimate, which has no standard error). The model is kept in the file, so
crffd site can score rows added later without retraining.

Before training, fit runs crffd check on the rows it will train on: it
prints the arms, the covariates with their types, the five most imbalanced
covariates with their standardised mean differences before and after
weighting, and the overlap verdict, and stores them in crff_balance.

Without a configuration file, the flags --db, --table, --id, --treatment
and --outcome name the records (as the site.* keys do); the model.* keys
keep their defaults unless set in the environment (CRFFD_MODEL_SEED=7).`,
		Example: `  # a site's configuration
  crffd fit --config hospital-a.yaml

  # a table imported from a CSV file, without writing any YAML
  crffd fit --db clinic.sqlite --table patients --id id --treatment treated --outcome outcome

  # what a fit will cost, before running it
  crffd fit --config hospital-a.yaml --plan

  # then read the effects
  sqlite3 clinic.sqlite 'SELECT * FROM crff_ate'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runFit(cmd, a) },
	}
	addRecordFlags(cmd)
	cmd.Flags().Bool("plan", false, "print the fit's expected time and peak memory, measured on a sample of the rows, and stop")
	return cmd
}

func runFit(cmd *cobra.Command, a *app) error {
	ctx := cmd.Context()
	tightenGC() // before the plan too, whose memory is that of this setting
	src, err := a.conf().SiteSource()
	if err != nil {
		return err
	}
	cfg, err := a.conf().Model()
	if err != nil {
		return err
	}
	if plan, _ := cmd.Flags().GetBool("plan"); plan {
		return runPlan(ctx, a, src, cfg)
	}
	phases := &pipeline.Phases{}
	start := time.Now()
	db, recs, err := a.openRecords(ctx, src)
	if err != nil {
		return err
	}
	defer db.Close()
	// The rows' results go beside the site file too, as its covariates
	// did: this command ends when its fit does.
	defer mapped.Use(filepath.Dir(src.DB), mapped.LargeMin)()
	start = phases.Since("read", start)
	if err := a.checkFit(ctx, db, src, recs); err != nil {
		return err
	}
	phases.Since("check", start)
	ch, err := a.choiceSettings(ctx)
	if err != nil {
		return err
	}
	run := pipeline.NewRunID()
	if err := db.BeginRun(ctx, run, recs.Layout); err != nil {
		return err
	}
	start = time.Now()
	a.log.Info("training", slog.String(logKeyRun, run), slog.String(logKeyDB, src.DB), slog.Int(logKeyRows, recs.Len()),
		slog.Int(logKeyRounds, cfg.RoundsFor(recs.Len())))
	f, err := pipeline.FitSite(ctx, pipeline.SiteFit{Run: run, DB: src.DB, Records: recs, Config: cfg, Choice: ch,
		Open: a.openSpectral, Progress: progress.New(os.Stderr, a.log), Logger: a.log, Phases: phases})
	if err != nil {
		return err
	}
	if err := db.AppendLoss(ctx, run, pipeline.FiniteLosses(f.Losses)...); err != nil {
		return err
	}
	written := time.Now()
	if err := pipeline.Publish(ctx, db, f.Run); err != nil {
		return err
	}
	phases.Since("write", written)
	if err := a.reportFit(f.Run, f.Selected, f.ATEs, start); err != nil {
		return err
	}
	if arrays, bytes := mapped.Made(); arrays > 0 {
		// What this fit kept beside the site file, freed as it ends.
		a.log.Info("arrays kept in unnamed temporary files", slog.String("folder", filepath.Dir(src.DB)),
			slog.Int("arrays", arrays), slog.Int64("bytes", bytes))
	}
	return phases.WriteText(a.stdout)
}

// checkFit is what crffd fit does between reading the records and
// training: it checks them (checkFitRecords), and prints, logs and
// stores their balance.
func (a *app) checkFit(ctx context.Context, db *store.Site, src store.Source, recs *store.Records) error {
	if len(recs.Rejected) > 0 {
		a.log.Warn("rows left out (on_invalid: skip); see crff_rejected", slog.String(logKeyDB, src.DB), slog.Int(logKeyRows, len(recs.Rejected)))
	}
	if err := checkFitRecords(a, src, recs); err != nil {
		return err
	}
	bal, err := db.CheckBalance(ctx, recs, nil)
	if err != nil {
		return err
	}
	if err := bal.WriteText(a.stdout, recs, 5); err != nil {
		return err
	}
	logBalance(a, src, bal)
	return nil
}

// reportFit logs that published run r fitted, since start, and prints
// its report (pipeline.WriteFit).
func (a *app) reportFit(r pipeline.Run, sel *pipeline.Selected, local inference.ATEs, start time.Time) error {
	m := r.Fitted.Models[0]
	a.log.Info("fitted", slog.String(logKeyRun, r.ID), slog.Float64(logKeySeconds, time.Since(start).Seconds()),
		slog.Int(logKeyRounds, m.Propensity.Rounds+m.Outcome.Rounds+m.Latent.Rounds))
	return pipeline.WriteFit(a.stdout, r, sel, local)
}

// runPlan prints what fitting src would cost (pipeline.PlanFit), and
// writes nothing to the site file.
func runPlan(ctx context.Context, a *app, src store.Source, cfg estimator.Config) error {
	db, err := a.openSite(ctx, src)
	if err != nil {
		return err
	}
	defer db.Close()
	start := time.Now()
	sample, err := db.SampleRecords(ctx, src, pipeline.PlanSampleRows)
	if err != nil {
		return err
	}
	read := time.Since(start)
	a.log.Debug("sampled", slog.Int(logKeyRows, sample.Len()), slog.Duration("read", read), slog.Duration("validate", sample.Validate))
	ch, err := a.choiceSettings(ctx)
	if err != nil {
		return err
	}
	old, err := db.CurrentCATERows(ctx)
	if err != nil {
		return err
	}
	p, err := pipeline.PlanFit(ctx, pipeline.PlanInput{Sample: sample, SampleRead: read, OldRows: old, Logger: a.log,
		Fit: pipeline.SiteFit{DB: src.DB, Config: cfg, Choice: ch, Open: a.openSpectral}})
	if err != nil {
		return err
	}
	return p.WriteText(a.stdout, src.DB)
}
