package pipeline

import (
	"log/slog"

	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/store"
)

// Log keys of the pipeline's log lines, those of crffd's other lines on
// the same subjects.
const (
	logKeyDB     = "db"
	logKeyRows   = "rows"
	logKeyColumn = "column"
	logKeyReason = "reason"
)

// WarnUnused logs, at WARN, each column of src left out of the
// covariates chosen automatically, so that none is left out silently.
func WarnUnused(log *slog.Logger, src store.Source, recs *store.Records) {
	for _, u := range recs.Unused {
		log.Warn("column not used as a covariate (list site.covariates to choose them)",
			slog.String(logKeyDB, src.DB), slog.String(logKeyColumn, u.Name), slog.String(logKeyReason, u.Reason))
	}
}

// WarnUncalibrated logs, at WARN, that the site file db had too few rows
// to calibrate its CATEs (cal is nil), which crff_cate then holds without
// intervals.
func WarnUncalibrated(log *slog.Logger, db string, rows int, cal *inference.Calibration) {
	if cal == nil {
		log.Warn("too few rows to calibrate the CATEs; crff_cate holds the CausalRFF CATEs without intervals",
			slog.String(logKeyDB, db), slog.Int(logKeyRows, rows))
	}
}
