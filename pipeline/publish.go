package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/store"
)

// Run is one run of a site as it is published: its fitted models, the
// rows it scored with their effects, CATEs and AIPW scores, and its
// other results.
type Run struct {
	ID      string
	Records *store.Records // the rows scored, all of them published
	Fitted  Fitted
	// Setup is the run's setup: Config, Scaler, Site, Sites and Rounds;
	// Publish sets the rest from the fields of Run.
	Setup   modelstore.Setup
	Effects *estimator.Effects // the rows' effects under Fitted.Models[0]
	CATE    []float64          // the rows' CATEs by Fitted.Estimator
	Scores  Scores             // the rows' AIPW scores
	// Calibration corrects the CATEs and gives their intervals; nil when
	// the run had too few rows for one.
	Calibration *inference.Calibration
	// Nuisance is the super learner that gave the rows' scores, kept for
	// rows scored later; nil when they came from the models alone.
	Nuisance *estimator.NuisanceStack
	// Results are the run's ATEs, model selection and transfer factors;
	// Publish adds the rows' CATEs and the rows rejected.
	Results store.Results
	// Logger, when not nil, is told what became of the what-if rows.
	Logger *slog.Logger
}

// Publish publishes run r in db: it saves its models, so that rows added
// later can be scored without retraining, writes its rows' CATEs a chunk
// at a time, and then its other results, which replace those of the
// current run at once (store.Site.WriteResults). The run must have begun
// (store.Site.BeginRun).
func Publish(ctx context.Context, db *store.Site, r Run) error {
	est := r.Fitted.Estimator
	setup := r.Setup
	setup.Kernel, setup.Extra, setup.Estimator = r.Fitted.Kernels[0], r.Fitted.Kernels[1:], &est
	setup.Schema, setup.Calibration, setup.Nuisance = r.Records.Schema, CalibrationParams(r.Calibration), r.Nuisance
	if err := modelstore.Save(ctx, db, r.ID, setup, r.Fitted.Models[0], r.Fitted.Models[1:]...); err != nil {
		return err
	}
	res := r.Results
	res.Rejected = r.Records.Rejected
	var err error
	if res.CATE, err = writeRows(ctx, db, r); err != nil {
		return err
	}
	if err := db.WriteResults(ctx, r.ID, res); err != nil {
		return err
	}
	// The run is published: what-if rows that cannot be scored, or a
	// crff_whatif without the run's covariates, are logged, not fatal.
	log := r.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	scored, faults, err := ScoreWhatIf(ctx, db, r.ID, r.Fitted, setup.Site, r.Calibration)
	switch {
	case err != nil:
		log.Warn("what-if rows not scored", slog.String("run", r.ID), slog.String("error", err.Error()))
	case scored+faults > 0:
		log.Info("scored what-if rows (crff_whatif_cate)", slog.String("run", r.ID), slog.Int("rows", scored), slog.Int("faults", faults))
	}
	return nil
}

// publishChunk is how many rows' CATEs Publish builds and writes at a
// time: a run's rows are never all held as crff_cate rows at once.
const publishChunk = 10000

// writeRows writes the CATEs of r's rows (Rows) as the run's, a chunk at
// a time (store.Site.WriteCATE), replacing any an earlier attempt wrote,
// and returns none; or, for the current run, whose rows only
// WriteResults replaces, returns them all.
func writeRows(ctx context.Context, db *store.Site, r Run) ([]store.CATE, error) {
	n := len(r.Records.IDs)
	cur, err := db.CurrentRun(ctx)
	if err != nil && !errors.Is(err, store.ErrNoRun) {
		return nil, err
	}
	if err == nil && cur.ID == r.ID {
		rows, err := Rows(r.Records, r.Effects, r.CATE, r.Scores, r.Calibration)
		if err != nil {
			return nil, fmt.Errorf("CATE of %q: %w", db.Path(), err)
		}
		return rows, nil
	}
	if err := db.DiscardCATE(ctx, r.ID); err != nil {
		return nil, err
	}
	for lo := 0; lo < n; lo += publishChunk {
		rows, err := RowsRange(r.Records, r.Effects, r.CATE, r.Scores, r.Calibration, lo, min(lo+publishChunk, n))
		if err != nil {
			return nil, fmt.Errorf("CATE of %q: %w", db.Path(), err)
		}
		if err := db.WriteCATE(ctx, r.ID, rows); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// Analyse returns the AIPW analysis of the rows of d of a site alone,
// whose CATEs are cate, and their ATEs: the AIPW one and the plug-in mean
// of cate. nu, when not nil, are the rows' nuisance predictions
// cross-fitted already (by model selection, under m's setup); otherwise
// the nuisance models are cross-fitted over m's folds.
func Analyse(ctx context.Context, m *estimator.Model, d *estimator.Data, cate []float64, nu *inference.Nuisance) (*inference.Analysis, inference.ATEs, error) {
	var an *inference.Analysis
	var err error
	if nu != nil {
		an, err = inference.Analyse(d.W, d.Y, *nu, cate, d.X)
	} else {
		an, err = estimator.Analyse(ctx, m.Setup, 0, d, cate)
	}
	if err != nil {
		return nil, inference.ATEs{}, err
	}
	plugin, err := inference.PlugIn(cate)
	if err != nil {
		return nil, inference.ATEs{}, err
	}
	return an, inference.ATEs{AIPW: an.AIPW, Clipped: an.Clipped, PlugIn: plugin}, nil
}

// AnalysisScores returns the rows' AIPW scores of an.
func AnalysisScores(an *inference.Analysis) Scores {
	return Scores{PSI: an.Scores, Clipped: an.ClippedRows}
}
