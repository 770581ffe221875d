package main

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/crffd/crffd/estimator"
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
	if err := printCovariates(a, recs); err != nil {
		return err
	}
	warnUnused(a, src, recs)
	if err := recs.CheckArms(positivity.MinArmRows); err != nil {
		return err
	}
	warnThinArms(a, src, recs.Arms())
	return nil
}

// printCovariates prints the covariates read and their types, and the
// columns left out of them, for example
//
//	covariates: age (continuous), sex (binary), score (continuous)
//	not a covariate: name (none of its 300 values is a number)
func printCovariates(a *app, recs *store.Records) error {
	l := recs.Layout
	parts := make([]string, len(l.Covariates))
	for j, c := range l.Covariates {
		t := "continuous"
		if j < len(l.Binary) && l.Binary[j] {
			t = "binary"
		}
		parts[j] = c + " (" + t + ")"
	}
	if _, err := fmt.Fprintf(a.stdout, "covariates: %s\n", strings.Join(parts, ", ")); err != nil {
		return err
	}
	for _, u := range recs.Unused {
		if _, err := fmt.Fprintf(a.stdout, "not a covariate: %s (%s)\n", u.Name, u.Reason); err != nil {
			return err
		}
	}
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

// printPositivity prints fit's positivity line after training, from the
// training rows' arms and estimated propensities: a warning naming each
// rule of package positivity that fails, or "ok" with the counts. For
// example
//
//	positivity: warning: 10 control rows (w = 0) among 300 (3.3%), below the 20 rows and 5% of the rows each arm should hold. The effects …
func printPositivity(a *app, recs *store.Records, eff *estimator.Effects) error {
	var treated, control []float64
	for i, w := range recs.Data.W {
		switch w {
		case 1:
			treated = append(treated, eff.Propensity[i])
		case 0:
			control = append(control, eff.Propensity[i])
		}
	}
	c := positivity.Of(recs.Layout.Treatment, treated, control)
	var err error
	if w := c.Warning(); w != "" {
		_, err = fmt.Fprintf(a.stdout, "positivity: warning: %s. The effects rest partly on extrapolation from the other arm; see crff_positivity and crff_overlap\n", w)
	} else {
		_, err = fmt.Fprintf(a.stdout, "positivity: ok: %d treated and %d control rows, %d with a propensity outside %s\n",
			c.Treated, c.Control, c.Outside, positivity.Bounds())
	}
	return err
}
