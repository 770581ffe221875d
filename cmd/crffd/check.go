package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/store"
)

func newCheckCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check --config SITE.yaml | --db FILE --table NAME ...",
		Short: "Diagnose the records before estimating: arms, missing values, covariate balance and overlap",
		Long: `check reads the site's records as crffd fit would and prints, before any
estimate, what the estimate will rest on:

  - the arms: treated and control rows, and rows left out for faults such as
    missing values (check leaves them out and counts them, whatever
    site.on_invalid says; fit refuses them unless on_invalid is skip);
  - the covariates used, with their types, and the missing (NULL) fields of
    each;
  - the balance of every covariate, most imbalanced first: its standardised
    mean difference (SMD, treated − control over the pooled standard
    deviation) before and after inverse-propensity weighting, with the
    propensity of a logistic regression on the covariates. |SMD| > 0.1 is the
    usual mark of imbalance;
  - the effective sample size the weights leave in each arm, and a verdict on
    overlap (good, limited or poor) with what to do about it.

It stores them in the site file: the view crff_balance holds one row per
covariate (scope local). crffd fit runs the same check before training, and
a federated run adds the global balance (scope global), pooled by the
coordinator from the sites' sums. Nothing is trained and nothing else is
written.

Without a configuration file, the flags --db, --table, --id, --treatment
and --outcome name the records (as the site.* keys do).`,
		Example: `  # the records of a site's configuration
  crffd check --config hospital-a.yaml

  # a table imported from a CSV file, without writing any YAML
  crffd import --db clinic.sqlite --table patients --csv patients.csv --header
  crffd check --db clinic.sqlite --table patients --id id --treatment treated --outcome outcome

  # then read the stored diagnostics
  sqlite3 clinic.sqlite 'SELECT rank, covariate, smd, smd_weighted FROM crff_balance'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCheck(cmd.Context(), a) },
	}
	addRecordFlags(cmd)
	return cmd
}

// addRecordFlags adds the flags that name a site's records without a
// configuration file, bound to the site.* keys.
func addRecordFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	for _, fl := range []struct{ name, key, usage string }{
		{"db", "site.db", "the site's SQLite file (site.db)"},
		{"table", "site.table", "the table or view of the records (site.table; default records)"},
		{"id", "site.id_column", "the row id column (site.id_column; default id)"},
		{"treatment", "site.treatment_column", "the treatment column, 0 or 1 (site.treatment_column; default w)"},
		{"outcome", "site.outcome_column", "the outcome column (site.outcome_column; default y)"},
	} {
		f.String(fl.name, "", fl.usage)
		bindFlag(f, fl.name, fl.key)
	}
	f.StringSlice("covariates", nil, "the covariate columns, comma-separated (site.covariates; default every other column holding numbers)")
	bindFlag(f, "covariates", "site.covariates")
}

func runCheck(ctx context.Context, a *app) error {
	src, err := a.conf().SiteSource()
	if err != nil {
		return err
	}
	// check reports faulty rows rather than stopping at them.
	src.OnInvalid = store.Skip
	db, recs, err := a.openRecords(ctx, src)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := recs.WriteCovariates(a.stdout); err != nil {
		return err
	}
	warnUnused(a, src, recs)
	b, err := db.CheckBalance(ctx, recs, nil)
	if err != nil {
		return err
	}
	if err := b.WriteText(a.stdout, recs, 0); err != nil {
		return err
	}
	_, err = fmt.Fprintln(a.stdout, "stored in crff_balance (scope local)")
	return err
}

// logBalance logs the verdict and the most imbalanced covariate at INFO,
// naming covariates but never values.
func logBalance(a *app, src store.Source, b store.Balance) {
	attrs := []any{slog.String(logKeyDB, src.DB), slog.String("verdict", string(b.Report.Verdict))}
	if r := b.Report.Ranked(); len(r) > 0 {
		attrs = append(attrs, slog.String("most_imbalanced", r[0].Name))
	}
	a.log.Info("balance checked", attrs...)
}
