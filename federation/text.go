package federation

import (
	"fmt"
	"io"
	"math"

	"github.com/crffd/crffd/selection"
)

// WriteText writes the result of a completed run, with its model
// selection chosen within z standard errors.
func (res *Result) WriteText(w io.Writer, z float64) error {
	total := 0
	for _, n := range res.Rows {
		total += n
	}
	g := res.GlobalAIPW
	if _, err := fmt.Fprintf(w, "run %s: %d sites, %d rows; global ATE %.4f, 95%% interval [%.4f, %.4f] (AIPW, se %.4f); plug-in %.4f\n",
		res.RunID, len(res.Sites), total, g.Estimate, g.Lower, g.Upper, g.SE, res.GlobalATE); err != nil {
		return err
	}
	if st := res.Selection; st != nil {
		return selection.WriteText(w, st.Candidates, st.Chosen, st.Held, z, st.Shifts(len(res.Sites)))
	}
	return nil
}

// WriteText writes a run the site completed: its rows, its model
// selection, and its local and global ATEs (scopes "local" and "global",
// as in crff_ate).
func (r *SiteResult) WriteText(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "run %s: %d rows scored\n", r.RunID, len(r.CATE)); err != nil {
		return err
	}
	if sel := r.Selection; sel != nil {
		if err := selection.WriteText(w, sel.Candidates, sel.Chosen, sel.HeldAll, math.NaN(), []float64{sel.Estimator.Shift}); err != nil {
			return err
		}
	}
	if err := r.Local.WriteText(w, "local"); err != nil {
		return err
	}
	return r.Global.WriteText(w, "global")
}
