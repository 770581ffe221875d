package site

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/pipeline"
	"github.com/crffd/crffd/selection"
	"github.com/crffd/crffd/store"
)

// scorer holds the model of the current run between polls.
type scorer struct {
	log    *slog.Logger
	db     *store.Site
	run    string
	fitted pipeline.Fitted
	setup  modelstore.Setup
	cal    *inference.Calibration // the run's calibration of the CATEs; nil when it has none

	// seen is the file's data version (store.Site.DataVersion) when the
	// last poll began, and clean whether that poll succeeded: a poll that
	// finds both unchanged has nothing to do.
	seen  int64
	clean bool
	// ateStale is set when crff_cate changed since the local ATEs were
	// last computed, and cleared when they are computed again.
	ateStale bool

	// open opens a kernel plugin. Each kernel is opened once and kept in
	// kernels for the daemon's life, so that reloading the model after
	// every run does not start one more plugin process each time.
	open    modelstore.SpectralFunc
	kernels map[string]estimator.Spectral
}

// spectral returns the kernel k, opening its plugin on first use.
func (s *scorer) spectral(ctx context.Context, k modelstore.Kernel) (estimator.Spectral, error) {
	key := pipeline.KernelLabel(k)
	if sp, ok := s.kernels[key]; ok {
		return sp, nil
	}
	sp, err := s.open(ctx, k)
	if err != nil {
		return nil, err
	}
	if s.kernels == nil {
		s.kernels = map[string]estimator.Spectral{}
	}
	s.kernels[key] = sp
	return sp, nil
}

// transient marks err as transient (ErrTransient) when the next poll may
// not meet it: a lock another writer held, or a run another process (crffd
// fit) published meanwhile, which the next poll loads.
func transient(err error) error {
	if errors.Is(err, store.ErrLocked) || errors.Is(err, store.ErrStaleRun) {
		return fmt.Errorf("%w: %w", ErrTransient, err)
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
			return fmt.Errorf("%w: %w", ErrTransient, err)
		}
		return fmt.Errorf("nothing to score with: %w (run crffd fit first)", err)
	}
	if cur.ID != s.run {
		if err := s.load(ctx, cur.ID); err != nil {
			return err
		}
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

// load loads the models, estimator and calibration of run.
func (s *scorer) load(ctx context.Context, run string) error {
	models, setup, err := modelstore.LoadAll(ctx, s.db, run, s.spectral)
	if err != nil {
		return err
	}
	var cal *inference.Calibration
	if setup.Calibration != nil {
		if cal, err = inference.NewCalibration(*setup.Calibration); err != nil {
			return fmt.Errorf("load the calibration of run %q: %w", run, err)
		}
	}
	var est selection.Estimator
	if setup.Estimator != nil {
		est = *setup.Estimator
	}
	s.fitted = pipeline.Fitted{Models: models, Kernels: append([]modelstore.Kernel{setup.Kernel}, setup.Extra...), Estimator: est}
	s.run, s.setup, s.cal, s.clean, s.ateStale = run, setup, cal, false, false
	s.log.Info("loaded model", slog.String(logKeyRun, run))
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
		s.log.Info("dropped the CATEs of deleted rows", slog.String(logKeyRun, s.run), slog.Int(logKeyRows, pruned))
	}
	edited, err := s.db.ForgetEdited(ctx, s.run)
	if err != nil {
		return transient(err)
	}
	if edited > 0 {
		s.log.Info("scoring edited rows again", slog.String(logKeyRun, s.run), slog.Int(logKeyRows, edited))
	}
	if err := s.scoreNew(ctx); err != nil {
		return err
	}
	switch scored, faults, err := pipeline.ScoreWhatIf(ctx, s.db, s.run, s.fitted, s.setup.Site, s.cal); {
	case errors.Is(err, store.ErrLocked) || errors.Is(err, store.ErrStaleRun):
		return transient(err)
	case err != nil:
		// A crff_whatif the user made without the run's covariates:
		// the site's own scoring goes on.
		s.log.Warn("what-if rows not scored", slog.String(logKeyRun, s.run), slog.String(logKeyError, err.Error()))
	case scored+faults > 0:
		s.log.Info("scored what-if rows (crff_whatif_cate)", slog.String(logKeyRun, s.run), slog.Int(logKeyRows, scored), slog.Int("faults", faults))
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
		s.log.Info("recomputed the local ATEs", slog.String(logKeyRun, s.run), slog.Int(logKeyRows, ates[len(ates)-1].N))
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
		s.log.Error("new rows refused (on_invalid: refuse); mend them, or set on_invalid: skip to score the others",
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
		if scores, err = s.score(ctx, recs); err != nil {
			return err
		}
	}
	rejected, err := s.db.AppendScores(ctx, s.run, scores, recs.Rejected)
	if err != nil {
		return transient(err)
	}
	s.ateStale = s.ateStale || len(scores) > 0
	if len(scores) > 0 || rejected > 0 {
		s.log.Info("scored new rows", slog.String(logKeyRun, s.run), slog.Int(logKeyRows, len(scores)), slog.Int(logKeyRejected, rejected))
	}
	return nil
}

// score returns the CATE rows of recs under the current run's models.
func (s *scorer) score(ctx context.Context, recs *store.Records) ([]store.CATE, error) {
	site, m := s.setup.Site, s.fitted.Models[0]
	eff, cate, err := s.fitted.Score(ctx, site, recs.Data)
	if err != nil {
		return nil, err
	}
	// The models never saw these rows, so their predictions are out of
	// sample for them, as the cross-fitted ones are for the run's rows;
	// the run's super learner combines them as it did the run's.
	nu, err := m.StackNuisance(site, recs.Data, s.setup.Nuisance)
	if err != nil {
		return nil, err
	}
	sc, err := pipeline.NewScores(recs.Data, nu)
	if err != nil {
		return nil, fmt.Errorf("AIPW scores of new rows: %w", err)
	}
	return pipeline.Rows(recs, eff, cate, sc, s.cal)
}
