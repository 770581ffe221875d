package audit

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
)

// ErrFailed reports a sensitivity above the accountant's bound.
var ErrFailed = errors.New("privacy audit failed")

// WriteText writes the results res of an audit of n rows with clip norm
// clip as a table, naming the audited rows by id (Result.Row indexes it,
// "-" when out of range), and returns an error wrapping ErrFailed when a
// ratio exceeds its bound.
func WriteText[ID any](w io.Writer, res []Result, ids []ID, clip float64) error {
	if _, err := fmt.Fprintf(w, "privacy audit: %d rows, clip C = %g; the largest ‖M(D) − M(D′)‖/C over the audited rows\n\n", len(ids), clip); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "model\tbatch\trelation\trows\tmax ‖Δ‖/C\tat row id\tbound\t")
	var bad int
	for _, r := range res {
		batch := "every row"
		if r.Rate < 1 {
			batch = fmt.Sprintf("Poisson q=%.4g", r.Rate)
		}
		verdict := "ok"
		if !r.OK() {
			verdict, bad = "ABOVE THE BOUND", bad+1
		}
		id := "-"
		if r.Row >= 0 && r.Row < len(ids) {
			id = fmt.Sprint(ids[r.Row])
		}
		var name any = r.Model
		if r.Statistic != "" {
			name = r.Statistic
		}
		fmt.Fprintf(tw, "%v\t%s\t%s\t%d\t%.4f\t%s\t%g\t%s\n", name, batch, r.Relation, r.Rows, r.Ratio, id, r.Bound, verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range res {
		if r.Statistic != "" {
			if _, err := fmt.Fprintf(w, "(for the %s, C is the sensitivity the accountant assumes of them)\n", r.Statistic); err != nil {
				return err
			}
			break
		}
	}
	if bad > 0 {
		return fmt.Errorf("%w: %d of %d ratios exceed the sensitivity the accountant assumes; the ε in crff_privacy does not hold", ErrFailed, bad, len(res))
	}
	_, err := fmt.Fprintf(w, "\nevery ratio is within its bound: the accountant's sensitivity holds on these rows\n")
	return err
}
