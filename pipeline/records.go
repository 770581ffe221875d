package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/crffd/crffd/balance"
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

// CheckBalance computes the balance of recs' rows from sums, or when sums
// is nil from the sums of a logistic propensity fitted on them, with the
// missing fields of each covariate column of the table, and stores it as
// the local balance of db (crff_balance).
func CheckBalance(ctx context.Context, db *store.Site, recs *store.Records, sums *balance.Sums) (store.Balance, error) {
	missing, _, err := db.CountMissing(ctx, recs.Layout)
	if err != nil {
		return store.Balance{}, err
	}
	if sums == nil {
		s, err := balance.Of(ctx, recs.Data.X, recs.Data.W)
		if err != nil {
			return store.Balance{}, fmt.Errorf("balance of %q: %w", recs.File, err)
		}
		sums = &s
	}
	l := recs.Layout
	r, err := balance.Summarise(*sums, l.Covariates, l.Binary, l.Treatment)
	if err != nil {
		return store.Balance{}, err
	}
	b := store.Balance{Scope: store.ScopeLocal, At: time.Now(), Sites: 1, LeftOut: len(recs.Rejected), Missing: missing, Report: r}
	if err := db.WriteBalance(ctx, b); err != nil {
		return store.Balance{}, err
	}
	return b, nil
}
