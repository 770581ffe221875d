package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/config"
	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/pipeline"
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
	src, err := a.conf().SiteSource()
	if err != nil {
		return err
	}
	cfg, err := a.conf().Model()
	if err != nil {
		return err
	}
	db, recs, err := a.openRecords(ctx, src)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := a.checkFit(ctx, db, src, recs); err != nil {
		return err
	}
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
	t, err := a.trainFit(ctx, run, src, ch, cfg, recs, bar)
	if err != nil {
		return err
	}
	r, local, err := a.scoreFit(ctx, src, cfg, run, recs, t, bar)
	if err != nil {
		return err
	}
	if err := db.AppendLoss(ctx, run, pipeline.FiniteLosses(t.losses)...); err != nil {
		return err
	}
	if err := pipeline.Publish(ctx, db, r); err != nil {
		return err
	}
	return a.reportFit(r, t.sel, local, start)
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

// fitTraining is what crffd fit trained: the models and estimator, the
// model selection that chose them (nil when there was no choice), and
// the loss history of the run's own kernel.
type fitTraining struct {
	pipeline.Fitted
	sel    *pipeline.Selected
	losses []store.Loss
}

// trainFit trains the models of ch on recs: one kernel's model, or every
// candidate of model selection, of which it keeps the chosen one's.
func (a *app) trainFit(ctx context.Context, run string, src store.Source, ch config.Choice, cfg estimator.Config, recs *store.Records, bar *progress.Line) (fitTraining, error) {
	if !ch.Single() {
		a.log.Info("fitting the candidates of model selection", slog.String(logKeyRun, run), slog.Int("kernels", len(ch.Kernels)),
			slog.Float64("validation_share", ch.Share))
		sel, err := a.selectModel(ctx, ch, recs.Data, recs.Schema, cfg, bar)
		bar.Done()
		if err != nil {
			return fitTraining{}, fmt.Errorf("fit %q: %w", src.DB, err)
		}
		return fitTraining{Fitted: sel.Fitted, sel: sel, losses: sel.Losses}, nil
	}
	spectral, err := a.openSpectral(ctx, ch.Kernels[0])
	if err != nil {
		return fitTraining{}, err
	}
	var losses []store.Loss
	model, err := estimator.Fit(trainingProgress(ctx, bar, &losses), []*estimator.Data{recs.Data}, recs.Schema, spectral, cfg)
	bar.Done()
	if err != nil {
		return fitTraining{}, fmt.Errorf("fit %q: %w", src.DB, err)
	}
	f := pipeline.Fitted{Models: []*estimator.Model{model}, Kernels: ch.Kernels[:1], Estimator: selection.Estimator{Kind: ch.Kinds[0]}}
	return fitTraining{Fitted: f, losses: losses}, nil
}

// scoreFit scores every row of recs with the models of t, computes their
// AIPW ATE, and returns them as run, ready to publish, with the ATEs.
func (a *app) scoreFit(ctx context.Context, src store.Source, cfg estimator.Config, run string, recs *store.Records, t fitTraining, bar *progress.Line) (pipeline.Run, inference.ATEs, error) {
	model := t.Models[0]
	eff, err := model.Effects(scoringProgress(ctx, bar), 0, recs.Data)
	bar.Done()
	if err != nil {
		return pipeline.Run{}, inference.ATEs{}, fmt.Errorf("score %q: %w", src.DB, err)
	}
	cate, err := t.CATE(ctx, 0, recs.Data, eff.CATE)
	if err != nil {
		return pipeline.Run{}, inference.ATEs{}, fmt.Errorf("score %q: %w", src.DB, err)
	}
	var nu *inference.Nuisance
	if t.sel != nil && model == t.sel.Result.Models[0] {
		// Model selection cross-fitted these rows' nuisances under this
		// model's setup for its held-out losses: the AIPW ATE reuses them.
		nu = &t.sel.Result.Nuisance[0]
	} else {
		a.log.Info("cross-fitting the nuisance models of the AIPW ATE", slog.String(logKeyRun, run), slog.Int("folds", cfg.Folds))
	}
	an, local, err := pipeline.Analyse(ctx, model, recs.Data, cate, nu)
	if err != nil {
		return pipeline.Run{}, inference.ATEs{}, fmt.Errorf("ATE of %q: %w", src.DB, err)
	}
	pipeline.WarnUncalibrated(a.log, src.DB, recs.Len(), an.Calibration)
	r := pipeline.Run{ID: run, Records: recs, Fitted: t.Fitted, Setup: modelstore.Setup{Config: cfg, Scaler: model.Setup.Scaler, Site: 0, Sites: 1},
		Effects: eff, CATE: cate, Scores: pipeline.AnalysisScores(an), Calibration: an.Calibration,
		Results: store.Results{ATE: pipeline.ATERows(store.ScopeLocal, local)}}
	if t.sel != nil {
		r.Results.Selection = t.sel.Rows
	}
	return r, local, nil
}

// reportFit prints the positivity of published run r, its rows, its
// model selection sel (nil: none) and its ATEs, and logs that it fitted.
func (a *app) reportFit(r pipeline.Run, sel *pipeline.Selected, local inference.ATEs, start time.Time) error {
	if err := r.Records.WritePositivity(a.stdout, r.Effects.Propensity); err != nil {
		return err
	}
	m := r.Fitted.Models[0]
	a.log.Info("fitted", slog.String(logKeyRun, r.ID), slog.Float64(logKeySeconds, time.Since(start).Seconds()),
		slog.Int(logKeyRounds, m.Propensity.Rounds+m.Outcome.Rounds+m.Latent.Rounds))
	if _, err := fmt.Fprintf(a.stdout, "run %s: %d rows scored, %d rejected\n", r.ID, r.Records.Len(), len(r.Records.Rejected)); err != nil {
		return err
	}
	if sel != nil {
		if err := selection.WriteText(a.stdout, sel.Result.Candidates, sel.Result.Chosen, sel.Validation, sel.Result.Z, []float64{sel.Estimator.Shift}); err != nil {
			return err
		}
	}
	return local.WriteText(a.stdout, string(store.ScopeLocal))
}
