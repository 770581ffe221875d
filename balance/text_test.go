package balance

import (
	"math"
	"strings"
	"testing"
)

// TestWriteText: the arms with the sites and rows left out, the missing
// fields, the covariates most imbalanced first up to the limit (a
// separating one first), the effective sample sizes and the verdict.
func TestWriteText(t *testing.T) {
	r := Report{
		Rows: [2]int{Control: 60, Treated: 40},
		ESS:  [2]float64{Control: 50.4, Treated: 30.6},
		Covariates: []Covariate{
			{Name: "age", Mean: [2]float64{50, 55}, SMD: 0.5, WSMD: 0.05},
			{Name: "sex", Binary: true, Mean: [2]float64{0.5, 0.5}},
			{Name: "site", Binary: true, Mean: [2]float64{0, 1}, SMD: math.NaN(), WSMD: math.NaN()},
		},
		Verdict: Limited, Reasons: []string{"a reason"}, Advice: "some advice",
	}
	var b strings.Builder
	err := r.WriteText(&b, Text{Sites: 2, LeftOut: 3, Faults: "3 rows for column age", Missing: []int{3, 0, 0}, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"arms: 40 treated, 60 control (100 rows at 2 sites; 3 left out for faults)\n",
		"left out: 3 rows for column age\n",
		"missing (NULL) fields: age 3\n",
		"  site       binary      1             0             separates  separates     imbalanced\n",
		"  age        continuous  55            50            +0.500     +0.050        balanced by weighting\n",
		"  … 1 more covariates in crff_balance\n",
		"imbalanced before weighting: ",
		"effective sample size after weighting: treated 31 of 40, control 50 of 60\n",
		"overlap: limited: a reason\n  what to do: some advice\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "  sex ") {
		t.Errorf("the third covariate shown beyond the limit:\n%s", out)
	}
}
