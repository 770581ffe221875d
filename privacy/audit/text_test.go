package audit_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/privacy/audit"
)

// TestWriteText: a ratio above its bound is marked and makes WriteText
// fail (crffd privacy audit then exits non-zero) naming how many exceeded;
// ratios within their bounds pass.
func TestWriteText(t *testing.T) {
	ids := []int64{10, 11}
	within := []audit.Result{
		{Model: estimator.Latent, Rate: 1, Relation: audit.AddRemove, Rows: 2, Ratio: 1, Row: 1, Bound: 1},
		{Model: estimator.Latent, Rate: 0.5, Relation: audit.ReplaceOne, Rows: 2, Ratio: 1.7, Row: 0, Bound: 2},
	}
	var out bytes.Buffer
	if err := audit.WriteText(&out, within, ids, 1); err != nil {
		t.Fatalf("within the bounds: %v", err)
	}
	if s := out.String(); !strings.Contains(s, "Poisson q=0.5") || !strings.Contains(s, " 11 ") || strings.Contains(s, "ABOVE") {
		t.Errorf("table:\n%s", s)
	}
	above := append(within, audit.Result{Model: estimator.Latent, Rate: 1, Relation: audit.AddRemove, Rows: 2, Ratio: 30.4, Row: 0, Bound: 1})
	out.Reset()
	err := audit.WriteText(&out, above, ids, 1)
	if !errors.Is(err, audit.ErrFailed) || !strings.Contains(err.Error(), "1 of 3 ratios") {
		t.Errorf("above the bound: %v, want audit.ErrFailed naming 1 of 3", err)
	}
	if !strings.Contains(out.String(), "30.4000") || !strings.Contains(out.String(), "ABOVE THE BOUND") {
		t.Errorf("table:\n%s", out.String())
	}
}
