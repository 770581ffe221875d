package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/balance"
	"github.com/crffd/crffd/pipeline"
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
	src, err := a.siteSource()
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
	if err := printCovariates(a, recs); err != nil {
		return err
	}
	warnUnused(a, src, recs)
	b, err := pipeline.CheckBalance(ctx, db, recs, nil)
	if err != nil {
		return err
	}
	if err := printBalance(a.stdout, b, recs, 0); err != nil {
		return err
	}
	_, err = fmt.Fprintln(a.stdout, "stored in crff_balance (scope local)")
	return err
}

// printBalance prints b: the arms, the missing fields, the covariates by
// imbalance (the first limit of them; 0 prints all), the effective sample
// sizes and the overlap verdict. recs, when not nil, supplies the faults of
// the rows left out.
func printBalance(w io.Writer, b store.Balance, recs *store.Records, limit int) error {
	r := b.Report
	p := &printer{w: w}
	n := r.Rows[balance.Treated] + r.Rows[balance.Control]
	p.printf("arms: %d treated, %d control (%d rows", r.Rows[balance.Treated], r.Rows[balance.Control], n)
	if b.Sites > 1 {
		p.printf(" at %d sites", b.Sites)
	}
	if b.LeftOut > 0 {
		p.printf("; %d left out for faults", b.LeftOut)
	}
	p.printf(")\n")
	if recs != nil && len(recs.Rejected) > 0 {
		p.printf("left out: %s\n", describeFaults(recs.Rejected))
	}
	if b.Missing != nil {
		var parts []string
		for j, m := range b.Missing {
			if m > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", r.Covariates[j].Name, m))
			}
		}
		if len(parts) > 0 {
			p.printf("missing (NULL) fields: %s\n", strings.Join(parts, ", "))
		} else {
			p.printf("missing (NULL) fields: none\n")
		}
	}
	p.printf("balance, most imbalanced first (SMD: standardised mean difference, treated − control; |SMD| > %g is imbalance):\n", balance.Threshold)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	ranked := r.Ranked()
	shown := ranked
	if limit > 0 && len(shown) > limit {
		shown = shown[:limit]
	}
	p.fprintf(tw, "  covariate\ttype\tmean treated\tmean control\tSMD\tweighted SMD\t\n")
	for _, c := range shown {
		t := "continuous"
		if c.Binary {
			t = "binary"
		}
		p.fprintf(tw, "  %s\t%s\t%.4g\t%.4g\t%s\t%s\t%s\n", c.Name, t, c.Mean[balance.Treated], c.Mean[balance.Control], smd(c.SMD), smd(c.WSMD), mark(c))
	}
	if err := tw.Flush(); err != nil && p.err == nil {
		p.err = err
	}
	if len(shown) < len(ranked) {
		p.printf("  … %d more covariates in crff_balance\n", len(ranked)-len(shown))
	}
	if imb := r.Imbalanced(false); len(imb) > 0 {
		p.printf("imbalanced before weighting: %s; after: %s\n", listOrNone(imb), listOrNone(r.Imbalanced(true)))
	}
	p.printf("effective sample size after weighting: treated %.0f of %d, control %.0f of %d\n",
		r.ESS[balance.Treated], r.Rows[balance.Treated], r.ESS[balance.Control], r.Rows[balance.Control])
	p.printf("overlap: %s", r.Verdict)
	if len(r.Reasons) > 0 {
		p.printf(": %s", strings.Join(r.Reasons, "; "))
	}
	p.printf("\n  what to do: %s\n", r.Advice)
	return p.err
}

// smd formats an SMD; NaN is a covariate that separates the arms.
func smd(v float64) string {
	if math.IsNaN(v) {
		return "separates"
	}
	return fmt.Sprintf("%+.3f", v)
}

// mark says how weighting changed a covariate's balance.
func mark(c balance.Covariate) string {
	before, after := balance.IsImbalanced(c.SMD), balance.IsImbalanced(c.WSMD)
	switch {
	case before && after:
		return "imbalanced"
	case before:
		return "balanced by weighting"
	case after:
		return "imbalanced after weighting"
	}
	return ""
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// describeFaults counts the rows left out by column, for example
// "bmi 3 (NULL), age 1", with the first row ids of each.
func describeFaults(rej []store.Rejection) string {
	type fault struct {
		n   int
		ids []string
	}
	var order []string
	by := map[string]*fault{}
	for _, r := range rej {
		f, ok := by[r.Column]
		if !ok {
			f = &fault{}
			by[r.Column] = f
			order = append(order, r.Column)
		}
		f.n++
		if len(f.ids) < 3 {
			f.ids = append(f.ids, r.RowID.String())
		}
	}
	parts := make([]string, len(order))
	for i, c := range order {
		f := by[c]
		parts[i] = fmt.Sprintf("%d rows for column %s (ids %s%s)", f.n, c, strings.Join(f.ids, ", "), map[bool]string{true: ", …"}[f.n > len(f.ids)])
	}
	return strings.Join(parts, "; ") + "; crff_rejected lists them after crffd fit with site.on_invalid: skip"
}

// printer writes formatted lines and keeps the first error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, args ...any) { p.fprintf(p.w, format, args...) }

func (p *printer) fprintf(w io.Writer, format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(w, format, args...)
	}
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
