// Package positivity holds the rules by which crffd judges whether a site's
// rows overlap: every threshold that crffd fit, crffd report, crffd demo and
// the views crff_overlap and crff_positivity use, and the words they say it
// in, so that all of them agree.
//
// Positivity (overlap) is the assumption that every kind of row could have
// received either arm. Where it fails, a row's effect is the difference
// between an outcome the site has seen and one it can only extrapolate from
// rows of the other arm that look different. A site fails the rules when
//
//   - an arm holds fewer than [MinArmRows] rows: crffd fit refuses to train,
//     before training, naming the arm and its count;
//   - an arm holds fewer than [SoftArmRows] rows or less than [SoftArmShare]
//     of the rows: crffd fit trains but warns, before training and in its
//     positivity line after; crffd report and crff_positivity warn too;
//   - more than [MaxOutsideShare] of the rows have an estimated propensity
//     outside [[Low], [High]]: the same warnings, after training.
//
// The arms count the rows whose treatment is 0 or 1: before training, the
// rows kept for training; after training, the rows scored.
package positivity

import (
	"fmt"
	"math"
	"strings"
)

const (
	// Low and High bound the propensities that count as overlapping: a
	// propensity below Low or above High means that a row could hardly have
	// received the other arm, so that its effect rests on extrapolation.
	// crff_overlap flags the buckets beyond them as extreme.
	Low  = 0.01
	High = 0.99

	// MinArmRows is the fewest rows an arm (treated, w = 1; control,
	// w = 0) must hold for crffd fit to train at all. It equals the default
	// of federation.min_arm_rows, the least a federated site needs in each
	// arm to take part in a run.
	MinArmRows = 5

	// SoftArmRows and SoftArmShare are the fewest rows, and the least share
	// of the rows, an arm should hold: below either, the site's own rows
	// say little about that arm's outcomes, and crffd warns.
	SoftArmRows  = 20
	SoftArmShare = 0.05

	// MaxOutsideShare is the largest share of the rows that may have a
	// propensity outside [Low, High] without a warning: a share above it
	// warns, a share equal to it does not.
	MaxOutsideShare = 0.05
)

// Counts are what a site's verdict rests on.
type Counts struct {
	Column  string // the treatment column, named in the messages; "" reads as "w"
	Treated int    // rows with treatment 1
	Control int    // rows with treatment 0
	Outside int    // of those, rows with a propensity outside [Low, High]; 0 before training
}

// Of counts the propensities of the treated and the control rows.
func Of(column string, treated, control []float64) Counts {
	c := Counts{Column: column, Treated: len(treated), Control: len(control)}
	for _, ps := range [][]float64{treated, control} {
		for _, p := range ps {
			if IsOutside(p) {
				c.Outside++
			}
		}
	}
	return c
}

// IsOutside reports whether propensity p lies outside [Low, High].
func IsOutside(p float64) bool { return p < Low || p > High }

// Rows returns the rows of both arms.
func (c Counts) Rows() int { return c.Treated + c.Control }

// Problems says which rules the counts fail, one sentence fragment per
// rule, in the order treated arm, control arm, propensities; none when they
// all hold or when there are no rows. For example:
//
//	10 control rows (w = 0) among 300 (3.3%), below the 20 rows and 5% of the rows each arm should hold
//	19 of 300 rows (6.3%) have a propensity outside [0.01, 0.99], above the 5% limit
//
// The view crff_positivity says the same in its warning column.
func (c Counts) Problems() []string {
	n := c.Rows()
	if n == 0 {
		return nil
	}
	var out []string
	for _, a := range []struct {
		name string
		bit  int
		rows int
	}{{"treated", 1, c.Treated}, {"control", 0, c.Control}} {
		if BelowSoftMinimum(a.rows, n) {
			out = append(out, fmt.Sprintf("%s (%s = %d) among %d (%s), %s",
				plural(a.rows, a.name+" row"), c.column(), a.bit, n, percent(a.rows, n), ArmRule()))
		}
	}
	if float64(c.Outside) > MaxOutsideShare*float64(n) {
		verb := "have"
		if c.Outside == 1 {
			verb = "has"
		}
		out = append(out, fmt.Sprintf("%d of %d rows (%s) %s a propensity outside %s",
			c.Outside, n, percent(c.Outside, n), verb, OutsideRule()))
	}
	return out
}

// Warning returns the problems joined with "; ", or "" when there are none.
func (c Counts) Warning() string { return strings.Join(c.Problems(), "; ") }

// BelowSoftMinimum reports whether an arm of rows rows, among n, holds fewer
// than SoftArmRows rows or less than SoftArmShare of them.
func BelowSoftMinimum(rows, n int) bool {
	return rows < SoftArmRows || float64(rows) < SoftArmShare*float64(n)
}

// SoftMinimum returns the fewest rows an arm should hold among n: the
// larger of SoftArmRows and SoftArmShare of n, rounded up.
func SoftMinimum(n int) int {
	return max(SoftArmRows, int(math.Ceil(SoftArmShare*float64(n))))
}

// ArmRule is how the messages state the soft minimum of an arm.
func ArmRule() string {
	return fmt.Sprintf("below the %d rows and %g%% of the rows each arm should hold", SoftArmRows, 100*SoftArmShare)
}

// OutsideRule is how the messages state the bounds and the largest share
// of rows outside them.
func OutsideRule() string {
	return fmt.Sprintf("%s, above the %g%% limit", Bounds(), 100*MaxOutsideShare)
}

// Bounds returns the interval [Low, High] as the messages print it.
func Bounds() string { return fmt.Sprintf("[%g, %g]", Low, High) }

// percent formats k of n as a percentage with one decimal, rounded half
// away from zero as SQLite's round does, so that crff_positivity prints
// the same figure.
func percent(k, n int) string {
	return fmt.Sprintf("%.1f%%", math.Round(1000*float64(k)/float64(n))/10)
}

// plural returns "1 thing" or "n things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

func (c Counts) column() string {
	if c.Column == "" {
		return "w"
	}
	return c.Column
}
