package pipeline

import (
	"fmt"
	"io"

	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/selection"
	"github.com/crffd/crffd/store"
)

// WriteFit writes what crffd fit prints of its published run r: the
// positivity of its propensities, its rows, its model selection sel
// (nil: none), its local ATEs and its heterogeneity.
func WriteFit(w io.Writer, r Run, sel *Selected, local inference.ATEs) error {
	if err := r.Records.WritePositivity(w, r.Effects.Propensity); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "run %s: %d rows scored, %d rejected\n", r.ID, r.Records.Len(), len(r.Records.Rejected)); err != nil {
		return err
	}
	if sel != nil {
		if err := selection.WriteText(w, sel.Result.Candidates, sel.Result.Chosen, sel.Validation, sel.Result.Z, []float64{sel.Estimator.Shift}); err != nil {
			return err
		}
	}
	if err := local.WriteText(w, string(store.ScopeLocal)); err != nil {
		return err
	}
	return WriteHeterogeneity(w, r.Results.Heterogeneity)
}
