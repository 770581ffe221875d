package pipeline

import (
	"context"
	"fmt"
	"math"

	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/store"
)

// ScoreWhatIf scores the what-if rows of db's crff_whatif that need it
// (store.Site.WhatIfRows) under run, the current run, whose fitted
// estimator is f at site index site and whose calibration is cal (nil:
// none; the rows then get the uncalibrated CATE and no interval), and
// writes them, with the rows that cannot be scored and why, to
// crff_whatif_cate. It returns how many rows it scored and how many it
// could not.
func ScoreWhatIf(ctx context.Context, db *store.Site, run string, f Fitted, site int, cal *inference.Calibration) (scored, faults int, err error) {
	w, err := db.WhatIfRows(ctx, run)
	if err != nil {
		return 0, 0, err
	}
	var out []store.WhatIfCATE
	if w.Data != nil {
		_, cate, err := f.Score(ctx, site, w.Data)
		if err != nil {
			return 0, 0, fmt.Errorf("what-if rows: %w", err)
		}
		out = make([]store.WhatIfCATE, len(cate))
		lo, hi := nanSlice(len(cate)), nanSlice(len(cate))
		if cal != nil {
			if cate, _, lo, hi, err = cal.Interval(cate, w.Data.X); err != nil {
				return 0, 0, fmt.Errorf("what-if rows: %w", err)
			}
		}
		for i, id := range w.IDs {
			out[i] = store.WhatIfCATE{ID: id, CATE: cate[i], Lower: lo[i], Upper: hi[i]}
		}
	}
	if len(out)+len(w.Faults)+len(w.Stale) == 0 {
		return 0, 0, nil
	}
	if err := db.WriteWhatIf(ctx, run, w, out); err != nil {
		return 0, 0, err
	}
	return len(out), len(w.Faults), nil
}

// nanSlice returns n NaNs: no interval.
func nanSlice(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = math.NaN()
	}
	return v
}
