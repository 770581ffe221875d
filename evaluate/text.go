package evaluate

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// WriteText writes r as crffd eval prints it: the summary per mode and
// source count, its doubly robust figures, how often each auto candidate
// was a member of the chosen ensemble, and the count and time of the runs.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODE\tSOURCES\tN\tSQRT(PEHE)\tATE ERROR\tATE BIAS")
	for _, s := range r.Summary {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.3f ± %.3f\t%.3f ± %.3f\t%+.3f\n", s.Mode, s.Sources, s.N, s.SqrtPEHEMean, s.SqrtPEHESE, s.ATEErrMean, s.ATEErrSE, s.ATEBiasMean)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nDoubly robust figures on the same test rows (95% intervals):")
	fmt.Fprintln(tw, "MODE\tSOURCES\tAIPW ERROR\tAIPW BIAS\tAIPW COVERAGE\tAIPW WIDTH\tDR SQRT(PEHE)\tCATE COVERAGE\tCATE WIDTH")
	for _, s := range r.Summary {
		aipw, dr := "-\t-\t-\t-", "-\t-\t-"
		if s.AIPWATEErrMean != nil {
			aipw = fmt.Sprintf("%.3f ± %.3f\t%+.3f\t%.2f\t%.3f", *s.AIPWATEErrMean, *s.AIPWATEErrSE, *s.AIPWBiasMean, *s.AIPWCoverage, *s.AIPWWidthMean)
		}
		if s.DRSqrtPEHEMean != nil {
			dr = fmt.Sprintf("%.3f ± %.3f\t%.2f\t%.3f", *s.DRSqrtPEHEMean, *s.DRSqrtPEHESE, *s.CATECoverage, *s.CATEWidthMean)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", s.Mode, s.Sources, aipw, dr)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := r.writeHetero(w); err != nil {
		return err
	}
	if err := r.writeChoices(w); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d runs in %.1f s\n", len(r.Runs), r.Seconds)
	return err
}

// writeChoices writes how often each candidate was a member of the auto
// mode's ensemble, per source count; nothing without auto runs.
func (r *Report) writeChoices(w io.Writer) error {
	type key struct {
		sources int
		name    string
	}
	member := map[key]int{}
	runs := map[int]int{}
	var keys []key
	for _, run := range r.Runs {
		if run.Mode != "auto" {
			continue
		}
		runs[run.Sources]++
		for _, c := range run.Candidates {
			k := key{run.Sources, c.Name}
			if !c.Member {
				continue
			}
			if member[k] == 0 {
				keys = append(keys, k)
			}
			member[k]++
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.SortFunc(keys, func(x, y key) int {
		if x.sources != y.sources {
			return x.sources - y.sources
		}
		if d := member[y] - member[x]; d != 0 {
			return d
		}
		return strings.Compare(x.name, y.name)
	})
	fmt.Fprintln(w, "\nauto: how often each candidate was a member of the chosen ensemble (chosen on the validation rows):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCES\tCANDIDATE\tRUNS")
	for _, k := range keys {
		fmt.Fprintf(tw, "%d\t%s\t%d of %d\n", k.sources, k.name, member[k], runs[k.sources])
	}
	return tw.Flush()
}

// writeHetero writes the heterogeneity tests against the truth, per mode
// and source count; nothing when no run has them.
func (r *Report) writeHetero(w io.Writer) error {
	if !slices.ContainsFunc(r.Summary, func(s Summary) bool { return s.BLPRejection != nil }) {
		return nil
	}
	fmt.Fprintln(w, "\nHeterogeneity on the same test rows (BLP test at 5%; coverage of 95% intervals; AUTOC against the true ranking's):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODE\tSOURCES\tBLP REJECTS\tGATES COVERAGE\tWORST FIFTH\tAUTOC COVERAGE\tAUTOC\tAUTOC (TRUE RANKING)\tPOLICY COVERAGE")
	for _, s := range r.Summary {
		if s.BLPRejection == nil {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.3f\t%.3f\t%.2f\n", s.Mode, s.Sources, *s.BLPRejection, *s.GATESCoverage, *s.GATESWorst, *s.AUTOCCoverage,
			*s.AUTOCMean, *s.AUTOCBestMean, *s.PolicyCoverage)
	}
	return tw.Flush()
}
