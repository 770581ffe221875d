package synth

import "math"

// Bound is a public range [Lo, Hi] of a column.
type Bound struct{ Lo, Hi float64 }

// Bounds returns public ranges of the design's columns, by name: every
// covariate and, for a real outcome, the outcome "y". They follow from the
// design's formulas and shifts, never from drawn rows, and are wide enough
// that a drawn value falls outside with negligible probability (six
// standard deviations of every normal draw): a differentially private site
// clips its values to them before it releases their sums (privacy.bounds).
// A binary outcome has no entry.
func (d Design) Bounds() map[string]Bound {
	lo, hi := 0.0, 0.0
	for _, v := range d.Delta {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	out := map[string]Bound{}
	switch {
	case d.Name == "" || d.Name == DesignPaper:
		for _, c := range d.Covariates() {
			out[c] = Bound{0, 1}
		}
		if !d.BinaryOutcome {
			// y = softplus(intercept + class effect + Δ) + N(0, 1), with
			// intercepts 0.9 and 7.9 and class effects of a few units.
			out["y"] = Bound{-8, 24 + hi}
		}
	case isSimple(d.Name):
		out["age"] = Bound{-10, 110} // N(50, 10²)
		out["sex"] = Bound{0, 1}
		out["score"] = Bound{lo - 6, hi + 6} // N(Δ, 1)
		switch d.Name {
		case DesignBinary:
		case DesignLogNormal:
			// y = exp(m + 0.75w + 0.8ε), m ≤ 0.3·6 + 0.2 + 0.5·(Δ + 6).
			out["y"] = Bound{0, math.Exp(5+0.75+0.8*6+0.5*hi) + 1}
		default:
			// mu0 = 1 + a + 0.5·sex + 1.5·score, a = (age − 50)/10 within
			// ±6; mu1 adds at most 2.5 + |score| (and the rough path,
			// within a few units); noise N(0, 1).
			out["y"] = Bound{-30 + 3*lo, 40 + 3*hi}
		}
	}
	return out
}
