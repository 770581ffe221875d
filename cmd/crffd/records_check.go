package main

import (
	"log/slog"

	"github.com/crffd/crffd/pipeline"
	"github.com/crffd/crffd/positivity"
	"github.com/crffd/crffd/store"
)

// checkFitRecords is what crffd fit does between reading the records and
// training: it prints the covariates it will use and the columns it left
// out, with why (and logs each of those at WARN); it refuses an arm with
// fewer than positivity.MinArmRows rows; and it warns, at WARN, of an arm
// below the soft minimum.
func checkFitRecords(a *app, src store.Source, recs *store.Records) error {
	if err := recs.WriteCovariates(a.stdout); err != nil {
		return err
	}
	warnUnused(a, src, recs)
	if err := recs.CheckArms(positivity.MinArmRows); err != nil {
		return err
	}
	warnThinArms(a, src, recs.Arms())
	return nil
}

// warnUnused logs, at WARN, each column left out of the covariates chosen
// automatically (pipeline.WarnUnused).
func warnUnused(a *app, src store.Source, recs *store.Records) {
	pipeline.WarnUnused(a.log, src, recs)
}

// warnThinArms logs, at WARN, each arm below the soft minimum of package
// positivity: fit goes on, but that arm's outcomes rest on few rows.
func warnThinArms(a *app, src store.Source, c positivity.Counts) {
	n := c.Rows()
	for _, arm := range []struct {
		name string
		rows int
	}{{string(store.Treated), c.Treated}, {string(store.Control), c.Control}} {
		if positivity.BelowSoftMinimum(arm.rows, n) {
			a.log.Warn("positivity: few rows in a treatment arm; training anyway, but its effects will rest on extrapolation",
				slog.String(logKeyDB, src.DB), slog.String(logKeyArm, arm.name), slog.Int(logKeyRows, arm.rows),
				slog.Int(logKeyTotal, n), slog.Int(logKeyLeast, positivity.SoftMinimum(n)))
		}
	}
}
