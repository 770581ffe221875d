package store

import (
	"fmt"
	"io"
	"strings"

	"github.com/crffd/crffd/balance"
	"github.com/crffd/crffd/positivity"
)

// WriteText writes b: the arms, the missing fields, the covariates by
// imbalance (the first limit of them; 0 writes all), the effective sample
// sizes and the overlap verdict. recs, when not nil, supplies the faults
// of the rows left out.
func (b Balance) WriteText(w io.Writer, recs *Records, limit int) error {
	t := balance.Text{Sites: b.Sites, LeftOut: b.LeftOut, Missing: b.Missing, Limit: limit}
	if recs != nil && len(recs.Rejected) > 0 {
		t.Faults = DescribeRejections(recs.Rejected)
	}
	return b.Report.WriteText(w, t)
}

// WriteCovariates writes the covariates read and their types, and the
// columns left out of them, for example
//
//	covariates: age (continuous), sex (binary), score (continuous)
//	not a covariate: name (none of its 300 values is a number)
func (r *Records) WriteCovariates(w io.Writer) error {
	l := r.Layout
	parts := make([]string, len(l.Covariates))
	for j, c := range l.Covariates {
		t := "continuous"
		if j < len(l.Binary) && l.Binary[j] {
			t = "binary"
		}
		parts[j] = c + " (" + t + ")"
	}
	if _, err := fmt.Fprintf(w, "covariates: %s\n", strings.Join(parts, ", ")); err != nil {
		return err
	}
	for _, u := range r.Unused {
		if _, err := fmt.Fprintf(w, "not a covariate: %s (%s)\n", u.Name, u.Reason); err != nil {
			return err
		}
	}
	return nil
}

// WritePositivity writes crffd fit's positivity line after training, from
// the rows' arms and their estimated propensities, one per row of r.Data:
// a warning naming each rule of package positivity that fails, or "ok"
// with the counts. For example
//
//	positivity: warning: 10 control rows (w = 0) among 300 (3.3%), below the 20 rows and 5% of the rows each arm should hold. The effects …
func (r *Records) WritePositivity(w io.Writer, propensity []float64) error {
	var treated, control []float64
	for i, arm := range r.Data.W {
		switch arm {
		case 1:
			treated = append(treated, propensity[i])
		case 0:
			control = append(control, propensity[i])
		}
	}
	c := positivity.Of(r.Layout.Treatment, treated, control)
	var err error
	if warn := c.Warning(); warn != "" {
		_, err = fmt.Fprintf(w, "positivity: warning: %s. The effects rest partly on extrapolation from the other arm; see crff_positivity and crff_overlap\n", warn)
	} else {
		_, err = fmt.Fprintf(w, "positivity: ok: %d treated and %d control rows, %d with a propensity outside %s\n",
			c.Treated, c.Control, c.Outside, positivity.Bounds())
	}
	return err
}
