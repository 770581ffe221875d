package balance

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// Text is what WriteText prints beside a report.
type Text struct {
	Sites   int    // the sites whose rows went in; more than one is said
	LeftOut int    // rows left out for faults such as missing values
	Faults  string // the faults of the rows left out, in words; "" for none
	Missing []int  // per covariate, NULL fields of its column; nil when unknown
	Limit   int    // the most imbalanced covariates shown; 0 shows all
}

// WriteText writes r in words, as crffd check and fit print it: the arms,
// the missing fields, the covariates by imbalance, the effective sample
// sizes and the overlap verdict with what to do about it.
func (r Report) WriteText(w io.Writer, t Text) error {
	p := &printer{w: w}
	n := r.Rows[Treated] + r.Rows[Control]
	p.printf("arms: %d treated, %d control (%d rows", r.Rows[Treated], r.Rows[Control], n)
	if t.Sites > 1 {
		p.printf(" at %d sites", t.Sites)
	}
	if t.LeftOut > 0 {
		p.printf("; %d left out for faults", t.LeftOut)
	}
	p.printf(")\n")
	if t.Faults != "" {
		p.printf("left out: %s\n", t.Faults)
	}
	if t.Missing != nil {
		var parts []string
		for j, m := range t.Missing {
			if m > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", r.Covariates[j].Name, m))
			}
		}
		p.printf("missing (NULL) fields: %s\n", listOrNone(parts))
	}
	r.writeCovariates(p, t.Limit)
	if imb := r.Imbalanced(false); len(imb) > 0 {
		p.printf("imbalanced before weighting: %s; after: %s\n", listOrNone(imb), listOrNone(r.Imbalanced(true)))
	}
	p.printf("effective sample size after weighting: treated %.0f of %d, control %.0f of %d\n",
		r.ESS[Treated], r.Rows[Treated], r.ESS[Control], r.Rows[Control])
	p.printf("overlap: %s", r.Verdict)
	if len(r.Reasons) > 0 {
		p.printf(": %s", strings.Join(r.Reasons, "; "))
	}
	p.printf("\n  what to do: %s\n", r.Advice)
	return p.err
}

// writeCovariates writes the table of the first limit covariates by
// imbalance (0: all).
func (r Report) writeCovariates(p *printer, limit int) {
	p.printf("balance, most imbalanced first (SMD: standardised mean difference, treated − control; |SMD| > %g is imbalance):\n", Threshold)
	tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
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
		p.fprintf(tw, "  %s\t%s\t%.4g\t%.4g\t%s\t%s\t%s\n", c.Name, t, c.Mean[Treated], c.Mean[Control], smdText(c.SMD), smdText(c.WSMD), mark(c))
	}
	if err := tw.Flush(); err != nil && p.err == nil {
		p.err = err
	}
	if len(shown) < len(ranked) {
		p.printf("  … %d more covariates in crff_balance\n", len(ranked)-len(shown))
	}
}

// smdText formats an SMD; NaN is a covariate that separates the arms.
func smdText(v float64) string {
	if math.IsNaN(v) {
		return "separates"
	}
	return fmt.Sprintf("%+.3f", v)
}

// mark says how weighting changed a covariate's balance.
func mark(c Covariate) string {
	before, after := IsImbalanced(c.SMD), IsImbalanced(c.WSMD)
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
