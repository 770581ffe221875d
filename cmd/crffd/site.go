package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/selection"
	"github.com/crffd/crffd/store"
)

func newSiteCmd(a *app) *cobra.Command {
	var once bool
	cmd := &cobra.Command{
		Use:   "site --config SITE.yaml",
		Short: "Run a site's daemon: score new rows with the stored model (and take part in a federation when configured)",
		Long: `site runs a site's daemon on its SQLite file. Every poll_interval it looks for
rows of the configured table that have no CATE yet and scores them with the
stored model of the current run, without retraining, appending them to
crff_cate. Rows deleted since lose their CATE; rows whose covariates were
edited are scored again; rows rejected before are read again, and scored
once mended; and the local ATEs of crff_ate are recomputed over the rows the
table holds. Under on_invalid: refuse, new invalid rows are logged and wait,
unscored, and the daemon keeps serving. When the configuration names a federation, it also takes part in
the federation's training runs; between runs it keeps scoring new rows with
the latest run's model, and each run retrains on, and rescores, every row.

The keys it reads most: site.db, site.table and the site.*_column keys (the
records), site.poll_interval, site.on_invalid, and for a federation
federation.address, federation.tls.ca, .cert and .key, and the secret
federation.secret (best set as CRFFD_FEDERATION_SECRET). crffd config show
--config FILE prints every key with its value and where it came from.`,
		Example: `  # score rows added after crffd fit, every site.poll_interval
  crffd site --config demo/site1.yaml

  # take part in one federated run (federation.address set), then leave
  CRFFD_FEDERATION_SECRET="$(cat /etc/crffd/secret)" crffd site --config hospital-a.yaml --once

  # score rows every minute and log every step
  CRFFD_SITE_POLL_INTERVAL=1m crffd site --config hospital-a.yaml --log-level debug`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if federated(a) {
				return runFederatedSite(cmd, a, once)
			}
			return runScoringSite(cmd.Context(), a, once)
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "leave after one pass (one scoring poll, or one complete federated run)")
	return cmd
}

// runScoringSite polls for unscored rows until ctx ends.
func runScoringSite(ctx context.Context, a *app, once bool) error {
	src, err := a.siteSource()
	if err != nil {
		return withExit(exitConfig, err)
	}
	every, err := a.durationSetting("site.poll_interval")
	if err != nil {
		return withExit(exitConfig, err)
	}
	db, err := a.openSite(ctx, src)
	if err != nil {
		return withExit(exitStorage, err)
	}
	defer db.Close()
	s := &scorer{a: a, db: db}
	a.log.Info("site scoring", slog.String(logKeyDB, src.DB), slog.Duration(logKeyInterval, every))
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if err := s.poll(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if once || !errors.Is(err, errTransient) {
				return err
			}
			a.log.Warn("scoring poll failed; retrying", slog.String(logKeyError, err.Error()))
		}
		if once {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// scoreBetweenRuns scores, every interval until ctx ends, the rows added
// to a federated site's table since its current run. Failures are logged,
// not returned: the site keeps taking part in federation runs, and each
// run rescores every row. Before the first run, and while a new run
// replaces the current one, there is nothing to score with, which is not
// worth a warning. kernels are the kernel plugins the site has open
// already, by kernelLabel, which the scorer uses rather than start its own.
func scoreBetweenRuns(ctx context.Context, a *app, db *store.Site, every time.Duration, kernels map[string]estimator.Spectral) {
	s := &scorer{a: a, db: db, kernels: kernels}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		err := s.poll(ctx)
		switch {
		case err == nil || ctx.Err() != nil:
		case errors.Is(err, store.ErrNoRun) || errors.Is(err, store.ErrStaleRun) || errors.Is(err, errTransient):
			a.log.Debug("no new rows scored", slog.String(logKeyError, err.Error()))
		default:
			a.log.Warn("scoring new rows failed; retrying", slog.String(logKeyError, err.Error()))
		}
	}
}

// errTransient marks a poll failure worth retrying, such as a locked file.
var errTransient = errors.New("transient")

// scorer holds the model of the current run between polls.
type scorer struct {
	a     *app
	db    *store.Site
	run   string
	model *estimator.Model
	extra []*estimator.Model // the further models of an ensemble (modelstore.Setup.Extra)
	setup modelstore.Setup
	cal   *inference.Calibration // the run's calibration of the CATEs; nil when it has none

	// seen is the file's data version (store.Site.DataVersion) when the
	// last poll began, and clean whether that poll succeeded: a poll that
	// finds both unchanged has nothing to do.
	seen  int64
	clean bool
	// ateStale is set when crff_cate changed since the local ATEs were
	// last computed, and cleared when they are computed again.
	ateStale bool

	// open opens a kernel plugin (app.openSpectral when nil). Each kernel
	// is opened once and kept in kernels for the daemon's life, so that
	// reloading the model after every run does not start one more plugin
	// process each time.
	open    modelstore.SpectralFunc
	kernels map[string]estimator.Spectral
}

// spectral returns the kernel k, opening its plugin on first use.
func (s *scorer) spectral(ctx context.Context, k modelstore.Kernel) (estimator.Spectral, error) {
	key := kernelLabel(k)
	if sp, ok := s.kernels[key]; ok {
		return sp, nil
	}
	open := s.open
	if open == nil {
		open = s.a.openSpectral
	}
	sp, err := open(ctx, k)
	if err != nil {
		return nil, err
	}
	if s.kernels == nil {
		s.kernels = map[string]estimator.Spectral{}
	}
	s.kernels[key] = sp
	return sp, nil
}

// transient marks err as transient (errTransient) when the next poll may
// not meet it: a lock another writer held, or a run another process (crffd
// fit) published meanwhile, which the next poll loads.
func transient(err error) error {
	if errors.Is(err, store.ErrLocked) || errors.Is(err, store.ErrStaleRun) {
		return fmt.Errorf("%w: %w", errTransient, err)
	}
	return err
}

// poll loads the current run's model when it changed, and rescores when
// the run or the file changed since the last poll that succeeded: a poll
// of an unchanged file costs two small queries, not a pass over the table.
func (s *scorer) poll(ctx context.Context) error {
	cur, err := s.db.CurrentRun(ctx)
	if err != nil {
		if errors.Is(err, store.ErrLocked) {
			return fmt.Errorf("%w: %w", errTransient, err)
		}
		return fmt.Errorf("nothing to score with: %w (run crffd fit first)", err)
	}
	if cur.ID != s.run {
		models, setup, err := modelstore.LoadAll(ctx, s.db, cur.ID, s.spectral)
		if err != nil {
			return err
		}
		m := models[0]
		s.extra = models[1:]
		var cal *inference.Calibration
		if setup.Calibration != nil {
			if cal, err = inference.NewCalibration(*setup.Calibration); err != nil {
				return fmt.Errorf("load the calibration of run %q: %w", cur.ID, err)
			}
		}
		s.run, s.model, s.setup, s.cal, s.clean, s.ateStale = cur.ID, m, setup, cal, false, false
		s.a.log.Info("loaded model", slog.String(logKeyRun, cur.ID))
	}
	seen, err := s.db.DataVersion(ctx)
	if err != nil {
		return transient(err)
	}
	if s.clean && seen == s.seen {
		return nil
	}
	s.clean, s.seen = false, seen
	if err := s.rescore(ctx); err != nil {
		return err
	}
	s.clean = true
	return nil
}

// rescore drops the CATEs of rows deleted or whose covariates were edited
// since they were scored, scores the rows that have no CATE, and then
// recomputes the local ATEs over the rows the site now holds.
func (s *scorer) rescore(ctx context.Context) error {
	pruned, err := s.db.PruneScores(ctx, s.run)
	if err != nil {
		return transient(err)
	}
	if pruned > 0 {
		s.ateStale = true
		s.a.log.Info("dropped the CATEs of deleted rows", slog.String(logKeyRun, s.run), slog.Int(logKeyRows, pruned))
	}
	edited, err := s.db.ForgetEdited(ctx, s.run)
	if err != nil {
		return transient(err)
	}
	if edited > 0 {
		s.a.log.Info("scoring edited rows again", slog.String(logKeyRun, s.run), slog.Int(logKeyRows, edited))
	}
	if err := s.scoreNew(ctx); err != nil {
		return err
	}
	if !s.ateStale {
		return nil
	}
	ates, err := s.db.UpdateLocalATE(ctx, s.run)
	if err != nil {
		return transient(err)
	}
	s.ateStale = false
	if len(ates) > 0 {
		s.a.log.Info("recomputed the local ATEs", slog.String(logKeyRun, s.run), slog.Int(logKeyRows, ates[len(ates)-1].N))
	}
	return nil
}

// scoreNew scores the rows that have no CATE, with their AIPW scores
// from the model's nuisance predictions where their treatment and
// outcome are valid.
func (s *scorer) scoreNew(ctx context.Context) error {
	recs, err := s.db.UnscoredRows(ctx)
	var invalid *store.ValidationError
	if errors.As(err, &invalid) {
		// on_invalid: refuse. The daemon keeps serving: the rows wait,
		// unscored, until they are mended, and the next change to the
		// file brings them back here.
		s.a.log.Error("new rows refused (on_invalid: refuse); mend them, or set on_invalid: skip to score the others",
			slog.String(logKeyRun, s.run), slog.String(logKeyError, err.Error()))
		return nil
	}
	if err != nil {
		return transient(err)
	}
	if recs.Len() == 0 && len(recs.Rejected) == 0 {
		return nil
	}
	var scores []store.CATE
	if recs.Len() > 0 {
		eff, err := s.model.Effects(ctx, s.setup.Site, recs.Data)
		if err != nil {
			return err
		}
		var est selection.Estimator
		if s.setup.Estimator != nil {
			est = *s.setup.Estimator
		}
		cate, err := est.CATEModels(ctx, append([]*estimator.Model{s.model}, s.extra...), s.setup.Site, recs.Data, eff.CATE)
		if err != nil {
			return err
		}
		// The model never saw these rows, so its own nuisance predictions
		// are out of sample for them, as the cross-fitted ones are for
		// the run's rows.
		nu, err := s.model.Nuisance(s.setup.Site, recs.Data)
		if err != nil {
			return err
		}
		sc, err := newScores(recs.Data, nu)
		if err != nil {
			return fmt.Errorf("AIPW scores of new rows: %w", err)
		}
		if scores, err = cateRows(recs, eff, cate, sc, s.cal); err != nil {
			return err
		}
	}
	rejected, err := s.db.AppendScores(ctx, s.run, scores, recs.Rejected)
	if err != nil {
		return transient(err)
	}
	s.ateStale = s.ateStale || len(scores) > 0
	if len(scores) > 0 || rejected > 0 {
		s.a.log.Info("scored new rows", slog.String(logKeyRun, s.run), slog.Int(logKeyRows, len(scores)), slog.Int(logKeyRejected, rejected))
	}
	return nil
}
