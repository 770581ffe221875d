package pipeline

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/store"
)

// TestRowsRange: the rows of a run built a chunk at a time, as Publish
// writes them, are the rows built at once, calibrated intervals included,
// and a range outside the rows is refused.
func TestRowsRange(t *testing.T) {
	const n = 250
	recs := confounded(n)
	recs.XDigests = make([]store.RowDigest, n)
	r := rand.New(rand.NewPCG(7, 7))
	e := &estimator.Effects{CATE: make([]float64, n), SD: make([]float64, n), Lower: make([]float64, n), Upper: make([]float64, n),
		Y0: make([]float64, n), Y1: make([]float64, n), Propensity: make([]float64, n)}
	cate, sc := make([]float64, n), Scores{PSI: make([]float64, n), Clipped: make([]bool, n)}
	for i := range n {
		recs.XDigests[i][0] = byte(i)
		e.CATE[i], e.SD[i], e.Lower[i], e.Upper[i] = 2+r.NormFloat64(), 0.5, 1, 3
		e.Y0[i], e.Y1[i], e.Propensity[i] = r.NormFloat64(), r.NormFloat64(), 0.5
		cate[i] = 2 + 0.5*recs.Data.X.At(i, 0) + 0.1*r.NormFloat64()
		sc.PSI[i], sc.Clipped[i] = cate[i]+2*r.NormFloat64(), i%7 == 0
	}
	cal, err := inference.FitCalibration(sc.PSI, cate, recs.Data.X)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*inference.Calibration{nil, cal} {
		whole, err := Rows(recs, e, cate, sc, c)
		if err != nil {
			t.Fatal(err)
		}
		var parts []store.CATE
		for lo := 0; lo < n; lo += 60 {
			p, err := RowsRange(recs, e, cate, sc, c, lo, min(lo+60, n))
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, p...)
		}
		// Printed, so that NaN equals NaN; each XDigest is the same pointer.
		if fmt.Sprint(parts) != fmt.Sprint(whole) {
			t.Errorf("calibrated %v: the rows built in chunks differ from the rows built at once", c != nil)
		}
		if c != nil && math.IsNaN(whole[0].SE) {
			t.Error("calibrated rows without a standard error")
		}
	}
	for _, lh := range [][2]int{{-1, 3}, {5, n + 1}, {9, 8}} {
		if _, err := RowsRange(recs, e, cate, sc, nil, lh[0], lh[1]); err == nil {
			t.Errorf("rows %d..%d of %d: no error", lh[0], lh[1], n)
		}
	}
}
