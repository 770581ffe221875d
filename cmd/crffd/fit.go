package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/progress"
	"github.com/crffd/crffd/selection"
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

  # then read the effects
  sqlite3 clinic.sqlite 'SELECT * FROM crff_ate'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runFit(cmd, a) },
	}
	addRecordFlags(cmd)
	return cmd
}

func runFit(cmd *cobra.Command, a *app) error {
	ctx := cmd.Context()
	src, err := a.siteSource()
	if err != nil {
		return err
	}
	cfg, err := a.modelConfig()
	if err != nil {
		return err
	}
	db, recs, err := a.openRecords(ctx, src)
	if err != nil {
		return err
	}
	defer db.Close()
	if len(recs.Rejected) > 0 {
		a.log.Warn("rows left out (on_invalid: skip); see crff_rejected", slog.String(logKeyDB, src.DB), slog.Int(logKeyRows, len(recs.Rejected)))
	}
	if err := checkFitRecords(a, src, recs); err != nil {
		return err
	}
	bal, err := checkBalance(ctx, db, recs, nil)
	if err != nil {
		return err
	}
	if err := printBalance(a.stdout, bal, recs, 5); err != nil {
		return err
	}
	logBalance(a, src, bal)
	ch, err := a.choiceSettings(ctx)
	if err != nil {
		return err
	}
	run := newRunID()
	if err := db.BeginRun(ctx, run, recs.Layout); err != nil {
		return err
	}
	start := time.Now()
	a.log.Info("training", slog.String(logKeyRun, run), slog.String(logKeyDB, src.DB), slog.Int(logKeyRows, recs.Len()))
	bar := progress.New(os.Stderr, a.log)
	var losses []store.Loss
	var model *estimator.Model
	var extra []*estimator.Model
	var extraKernels []modelstore.Kernel
	var sel *selected
	kernel := ch.kernels[0]
	est := selection.Estimator{Kind: selection.KindLatent}
	if ch.single() {
		spectral, err := a.openSpectral(ctx, kernel)
		if err != nil {
			return err
		}
		est.Kind = ch.kinds[0]
		model, err = estimator.Fit(trainingProgress(ctx, bar, &losses), []*estimator.Data{recs.Data}, recs.Schema, spectral, cfg)
		bar.Done()
		if err != nil {
			return fmt.Errorf("fit %q: %w", src.DB, err)
		}
	} else {
		a.log.Info("fitting the candidates of model selection", slog.String(logKeyRun, run), slog.Int("kernels", len(ch.kernels)),
			slog.Float64("validation_share", ch.share))
		sel, err = a.selectModel(ctx, ch, recs.Data, recs.Schema, cfg, bar)
		bar.Done()
		if err != nil {
			return fmt.Errorf("fit %q: %w", src.DB, err)
		}
		model, kernel, est, losses = sel.model, sel.kernel, sel.est, sel.losses
		extra, extraKernels = sel.extra, sel.extraKernels
	}
	eff, err := model.Effects(scoringProgress(ctx, bar), 0, recs.Data)
	bar.Done()
	if err != nil {
		return fmt.Errorf("score %q: %w", src.DB, err)
	}
	cate, err := est.CATEModels(ctx, append([]*estimator.Model{model}, extra...), 0, recs.Data, eff.CATE)
	if err != nil {
		return fmt.Errorf("score %q: %w", src.DB, err)
	}
	var an *inference.Analysis
	if sel != nil && model == sel.result.Models[0] {
		// Model selection cross-fitted these rows' nuisances under this
		// model's setup for its held-out losses: the AIPW ATE reuses them.
		an, err = inference.Analyse(recs.Data.W, recs.Data.Y, sel.result.Nuisance[0], cate, recs.Data.X)
	} else {
		a.log.Info("cross-fitting the nuisance models of the AIPW ATE", slog.String(logKeyRun, run), slog.Int("folds", cfg.Folds))
		an, err = estimator.Analyse(ctx, model.Setup, 0, recs.Data, cate)
	}
	if err != nil {
		return fmt.Errorf("ATE of %q: %w", src.DB, err)
	}
	plugin, err := inference.PlugIn(cate)
	if err != nil {
		return fmt.Errorf("ATE of %q: %w", src.DB, err)
	}
	local := inference.ATEs{AIPW: an.AIPW, Clipped: an.Clipped, PlugIn: plugin}
	cates, err := cateRows(recs, eff, cate, rowScores{an.Scores, an.ClippedRows}, an.Calibration)
	if err != nil {
		return fmt.Errorf("CATE of %q: %w", src.DB, err)
	}
	warnUncalibrated(a, src, recs.Len(), an.Calibration)
	setup := modelstore.Setup{Kernel: kernel, Config: cfg, Scaler: model.Setup.Scaler, Schema: recs.Schema, Site: 0, Sites: 1,
		Calibration: calibrationParams(an.Calibration), Estimator: &est, Extra: extraKernels}
	if err := modelstore.Save(ctx, db, run, setup, model, extra...); err != nil {
		return err
	}
	if err := db.AppendLoss(ctx, run, finiteLosses(losses)...); err != nil {
		return err
	}
	res := store.Results{CATE: cates, ATE: storeATEs(store.ScopeLocal, local), Rejected: recs.Rejected}
	if sel != nil {
		res.Selection = sel.rows
	}
	if err := db.WriteResults(ctx, run, res); err != nil {
		return err
	}
	if err := printPositivity(a, recs, eff); err != nil {
		return err
	}
	a.log.Info("fitted", slog.String(logKeyRun, run), slog.Float64(logKeySeconds, time.Since(start).Seconds()),
		slog.Int(logKeyRounds, model.Propensity.Rounds+model.Outcome.Rounds+model.Latent.Rounds))
	if _, err := fmt.Fprintf(a.stdout, "run %s: %d rows scored, %d rejected\n", run, recs.Len(), len(recs.Rejected)); err != nil {
		return err
	}
	if sel != nil {
		if err := printSelection(a.stdout, sel.result.Candidates, sel.result.Chosen, sel.val, sel.result.Z, []float64{sel.est.Shift}); err != nil {
			return err
		}
	}
	return printATEs(a.stdout, store.ScopeLocal, local)
}
