package store

import (
	"errors"
	"fmt"

	"github.com/crffd/crffd/positivity"
)

// Arms counts the kept rows by treatment arm, for the rules of package
// positivity (with no propensity yet, so Outside is 0).
func (r *Records) Arms() positivity.Counts {
	c := positivity.Counts{Column: r.Layout.Treatment}
	if r.Data == nil {
		return c
	}
	for _, w := range r.Data.W {
		switch w {
		case 1:
			c.Treated++
		case 0:
			c.Control++
		}
	}
	return c
}

// CheckArms refuses records with fewer than least rows in an arm, as
// crffd fit does with [positivity.MinArmRows] before it trains: one
// *[ArmError] per arm below it, joined when both are. It names counts only,
// never a row.
func (r *Records) CheckArms(least int) error {
	c := r.Arms()
	var errs []error
	for _, a := range []struct {
		arm  Arm
		rows int
	}{{Treated, c.Treated}, {Control, c.Control}} {
		if a.rows < least {
			errs = append(errs, &ArmError{File: r.File, Table: r.Layout.Table, Column: r.Layout.Treatment,
				Arm: a.arm, Rows: a.rows, Total: c.Rows(), Rejected: r.Read - r.Len(), Least: least})
		}
	}
	return errors.Join(errs...)
}

// Arm is a treatment arm.
type Arm string

// The two arms.
const (
	Treated Arm = "treated" // treatment 1
	Control Arm = "control" // treatment 0
)

// bit returns the arm's treatment value.
func (a Arm) bit() int {
	if a == Treated {
		return 1
	}
	return 0
}

// ArmError reports an arm with too few rows. It holds counts only.
type ArmError struct {
	File     string // the site file
	Table    string // the configured table or view
	Column   string // the treatment column
	Arm      Arm
	Rows     int // rows in the arm
	Total    int // rows in both arms
	Rejected int // rows left out by on_invalid: skip before counting
	Least    int // the fewest allowed
}

// Error formats the error as, for example,
//
//	site "a.sqlite", table "records", column "w": 1 control row (w = 0) among 300; at least 5 are needed in each arm
func (e *ArmError) Error() string {
	rows := fmt.Sprintf("%d %s rows", e.Rows, e.Arm)
	if e.Rows == 1 {
		rows = fmt.Sprintf("1 %s row", e.Arm)
	}
	kept := ""
	if e.Rejected > 0 {
		kept = fmt.Sprintf(" kept (%d left out by on_invalid: skip)", e.Rejected)
	}
	return fmt.Sprintf("site %q, table %q, column %q: %s (%s = %d) among %d%s; at least %d are needed in each arm",
		e.File, e.Table, e.Column, rows, e.Column, e.Arm.bit(), e.Total, kept, e.Least)
}

// Unwrap returns ErrFewArmRows.
func (e *ArmError) Unwrap() error { return ErrFewArmRows }
