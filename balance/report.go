package balance

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/crffd/crffd/positivity"
)

// Covariate is the balance of one covariate. Index 0 of each pair is the
// control arm, 1 the treated arm.
type Covariate struct {
	Name   string
	Binary bool
	Mean   [2]float64 // mean per arm
	WMean  [2]float64 // mean per arm under the ATE weights
	SD     float64    // √((s²_t + s²_c)/2), the unweighted pooled standard deviation
	SMD    float64    // (Mean[1] − Mean[0]) / SD; NaN when SD is 0 and the means differ
	WSMD   float64    // (WMean[1] − WMean[0]) / SD; NaN likewise
}

// Verdict is the plain verdict on overlap.
type Verdict string

// The verdicts, from best to worst.
const (
	Good    Verdict = "good"    // no positivity problem, the weights are even enough, and weighting balances every covariate
	Limited Verdict = "limited" // no positivity problem, but uneven weights or a covariate weighting leaves imbalanced
	Poor    Verdict = "poor"    // a positivity rule of package positivity fails
)

// Report is the balance of a set of rows.
type Report struct {
	Rows       [2]int     // rows per arm
	ESS        [2]float64 // Kish's effective sample size (Σω)²/Σω² per arm under the ATE weights
	Outside    [2]int     // rows per arm whose propensity is outside the bounds of Collect
	Covariates []Covariate
	Verdict    Verdict
	Reasons    []string // why the verdict is not Good, in words
	Advice     string   // what to do about it
}

// MinESSShare is the least share of an arm's rows its effective sample
// size may fall to without the verdict becoming Limited: below it, a few
// rows with extreme weights carry the arm.
const MinESSShare = 0.5

// Summarise returns the report of the rows whose Sums are s. names and
// binary describe the covariates, in s's column order; the treatment
// column's name, when given, is used in the words of the verdict.
func Summarise(s Sums, names []string, binary []bool, treatment string) (Report, error) {
	d := s.Dim()
	if len(names) != d || len(binary) != d {
		return Report{}, fmt.Errorf("%w: %d covariates in the sums, %d names, %d types", ErrShape, d, len(names), len(binary))
	}
	var r Report
	for a := range 2 {
		r.Rows[a], r.Outside[a] = int(s.N[a]), int(s.Outside[a])
		if s.WW[a] > 0 {
			r.ESS[a] = s.W[a] * s.W[a] / s.WW[a]
		}
	}
	r.Covariates = make([]Covariate, d)
	for j := range d {
		c := Covariate{Name: names[j], Binary: binary[j]}
		var v [2]float64
		for a := range 2 {
			c.Mean[a], c.WMean[a], v[a] = math.NaN(), math.NaN(), math.NaN()
			if n := s.N[a]; n > 0 {
				c.Mean[a] = s.Sum[a][j] / n
				c.WMean[a] = s.WSum[a][j] / s.W[a]
				v[a] = 0
				if n > 1 {
					v[a] = math.Max(0, (s.SumSq[a][j]-s.Sum[a][j]*s.Sum[a][j]/n)/(n-1))
				}
			}
		}
		c.SD = math.Sqrt((v[0] + v[1]) / 2)
		c.SMD, c.WSMD = standardise(c.Mean, c.SD), standardise(c.WMean, c.SD)
		r.Covariates[j] = c
	}
	r.judge(treatment)
	return r, nil
}

// standardise returns (m[1] − m[0]) / sd: 0 when the means agree, NaN when
// they differ and sd is 0 (the covariate separates the arms).
func standardise(m [2]float64, sd float64) float64 {
	diff := m[1] - m[0]
	if math.IsNaN(diff) {
		return math.NaN()
	}
	if math.Abs(diff) <= 1e-12*math.Max(math.Abs(m[0]), math.Abs(m[1])) {
		return 0
	}
	if sd == 0 {
		return math.NaN()
	}
	return diff / sd
}

// Ranked returns the covariates by |SMD| before weighting, largest first;
// a covariate that separates the arms (NaN) comes first of all.
func (r Report) Ranked() []Covariate {
	out := slices.Clone(r.Covariates)
	key := func(c Covariate) float64 {
		if math.IsNaN(c.SMD) {
			return math.Inf(1)
		}
		return math.Abs(c.SMD)
	}
	slices.SortStableFunc(out, func(a, b Covariate) int { return cmp.Compare(key(b), key(a)) })
	return out
}

// IsImbalanced reports whether smd marks imbalance: |smd| above Threshold,
// or NaN (a covariate that separates the arms).
func IsImbalanced(smd float64) bool { return math.IsNaN(smd) || math.Abs(smd) > Threshold }

// Imbalanced returns the names of the covariates imbalanced before
// weighting (weighted false) or after it, in Ranked order.
func (r Report) Imbalanced(weighted bool) []string {
	var out []string
	for _, c := range r.Ranked() {
		v := c.SMD
		if weighted {
			v = c.WSMD
		}
		if IsImbalanced(v) {
			out = append(out, c.Name)
		}
	}
	return out
}

// judge sets the verdict, its reasons and the advice.
func (r *Report) judge(treatment string) {
	counts := positivity.Counts{Column: treatment, Treated: r.Rows[Treated], Control: r.Rows[Control], Outside: r.Outside[0] + r.Outside[1]}
	r.Reasons = counts.Problems()
	if len(r.Reasons) > 0 {
		r.Verdict = Poor
		r.Advice = "some rows could hardly have received the other arm, so their effects rest on extrapolation: " +
			"restrict the rows to where both arms occur (crff_overlap shows where, after crffd fit), " +
			"or add rows of the thin arm, and read the ATE with caution"
		return
	}
	var uneven []string
	for a, arm := range []string{"control", "treated"} {
		if r.Rows[a] > 0 && r.ESS[a] < MinESSShare*float64(r.Rows[a]) {
			uneven = append(uneven, fmt.Sprintf("the weights leave the %s arm the weight of %.0f of its %d rows", arm, r.ESS[a], r.Rows[a]))
		}
	}
	left := r.Imbalanced(true)
	switch {
	case len(uneven) == 0 && len(left) == 0:
		r.Verdict = Good
		r.Advice = fmt.Sprintf("both arms overlap and inverse-propensity weighting balances every covariate (|SMD| ≤ %g)", Threshold)
		return
	case len(uneven) > 0:
		r.Advice = "a few rows with extreme propensities carry much weight: estimates will be noisier than the row count suggests " +
			"(the AIPW interval accounts for it); restricting the rows to where both arms are common narrows it"
	default:
		r.Advice = "a logistic propensity does not balance these covariates: their relation to the treatment is not linear " +
			"(CausalRFF's propensity model is not linear; compare its doubly robust ATE with the plug-in one), " +
			"or the arms barely overlap in them"
	}
	r.Verdict = Limited
	r.Reasons = uneven
	if len(left) > 0 {
		r.Reasons = append(r.Reasons, fmt.Sprintf("after weighting, |SMD| > %g for %s", Threshold, strings.Join(left, ", ")))
	}
}
