package positivity

import (
	"strings"
	"testing"
)

// TestProblems checks each rule at and around its threshold.
func TestProblems(t *testing.T) {
	tests := []struct {
		name string
		c    Counts
		want []string // substrings of the problems, in order; none for no problem
	}{
		{"nothing counted", Counts{}, nil},
		{"balanced", Counts{Treated: 150, Control: 150, Outside: 3}, nil},
		{"arm of exactly 20 rows and 5%", Counts{Treated: 380, Control: 20}, nil},
		{"arm of 19 rows", Counts{Treated: 181, Control: 19},
			[]string{"19 control rows (w = 0) among 200 (9.5%), below the 20 rows and 5% of the rows each arm should hold"}},
		{"arm under 5% with more than 20 rows", Counts{Column: "treated", Treated: 49, Control: 951},
			[]string{"49 treated rows (treated = 1) among 1000 (4.9%), below the 20 rows and 5% of the rows each arm should hold"}},
		{"one control row", Counts{Treated: 299, Control: 1}, []string{"1 control row (w = 0) among 300 (0.3%)"}},
		{"both arms thin", Counts{Treated: 6, Control: 6}, []string{"6 treated rows (w = 1) among 12 (50.0%)", "6 control rows (w = 0) among 12"}},
		{"outside at exactly 5%", Counts{Treated: 200, Control: 200, Outside: 20}, nil},
		{"outside above 5%", Counts{Treated: 200, Control: 200, Outside: 21},
			[]string{"21 of 400 rows (5.3%) have a propensity outside [0.01, 0.99], above the 5% limit"}},
		{"one row outside", Counts{Treated: 5, Control: 5, Outside: 1},
			[]string{"5 treated rows", "5 control rows", "1 of 10 rows (10.0%) has a propensity outside"}},
		{"rounding half away from zero", Counts{Treated: 380, Control: 20, Outside: 21}, []string{"21 of 400 rows (5.3%)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.c.Problems()
			if len(got) != len(tt.want) {
				t.Fatalf("Problems() = %q, want %d problems like %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], w)
				}
			}
			if tt.c.Warning() != strings.Join(got, "; ") {
				t.Errorf("Warning() = %q, want the problems joined", tt.c.Warning())
			}
		})
	}
}

func TestOf(t *testing.T) {
	c := Of("w", []float64{0.005, 0.5, 0.99, 0.995}, []float64{0, 0.01, 1})
	if c.Treated != 4 || c.Control != 3 || c.Outside != 4 {
		t.Errorf("Of = %+v, want 4 treated, 3 control, 4 outside (the bounds themselves are inside)", c)
	}
}

func TestMinimaAgree(t *testing.T) {
	// fit's hard minimum must be below its soft one, or the warning could
	// never show.
	if MinArmRows >= SoftArmRows {
		t.Errorf("MinArmRows %d is not below SoftArmRows %d", MinArmRows, SoftArmRows)
	}
}

// TestSoftMinimum checks that SoftMinimum is the least arm that is not
// below the soft minimum.
func TestSoftMinimum(t *testing.T) {
	for _, n := range []int{0, 1, 12, 40, 399, 400, 401, 1000, 1001, 12345} {
		m := SoftMinimum(n)
		if BelowSoftMinimum(m, n) || m > 0 && !BelowSoftMinimum(m-1, n) {
			t.Errorf("SoftMinimum(%d) = %d, but BelowSoftMinimum(%d) = %v and (%d) = %v", n, m, m, BelowSoftMinimum(m, n), m-1, BelowSoftMinimum(m-1, n))
		}
	}
	if SoftMinimum(1000) != 50 || SoftMinimum(300) != 20 {
		t.Errorf("SoftMinimum(1000) = %d, (300) = %d; want 50 and 20", SoftMinimum(1000), SoftMinimum(300))
	}
}
