package store

import (
	"errors"
	"fmt"
	"strings"
)

// Errors of opening a site file. They arrive wrapped with the file's name;
// test for them with errors.Is.
var (
	// ErrNotSQLite means that the file is not an SQLite database.
	ErrNotSQLite = errors.New("not an SQLite database")
	// ErrLocked means that another connection held a lock on the file for
	// longer than the busy timeout.
	ErrLocked = errors.New("database is locked by another connection")
	// ErrSchemaTooNew means that the file's crff_ schema was written by a
	// newer crffd than this one.
	ErrSchemaTooNew = errors.New("crff_ schema is newer than this crffd")
	// ErrClosed means that the Site was used after Close.
	ErrClosed = errors.New("site is closed")
	// ErrNotSite means that a file opened read-only does not hold this
	// crffd's crff_ tables.
	ErrNotSite = errors.New("not a crffd site file at this crffd's schema")
	// ErrReadOnly means a write to a site opened with Options.ReadOnly.
	ErrReadOnly = errors.New("site is open read-only")
)

// Errors of reading and validating records, each the Err of a
// [ValidationError].
var (
	// ErrMissingTable means that the configured table or view does not exist.
	ErrMissingTable = errors.New("no such table or view")
	// ErrMissingColumn means that a configured column does not exist.
	ErrMissingColumn = errors.New("no such column")
	// ErrNoCovariates means that there is no covariate column.
	ErrNoCovariates = errors.New("no covariate columns")
	// ErrBadID means that a row id is NULL or neither an integer nor a text.
	ErrBadID = errors.New("id is not an integer or a text")
	// ErrDuplicateID means that two or more rows share an id.
	ErrDuplicateID = errors.New("duplicate id")
	// ErrNull means that a covariate is NULL. SQLite stores NaN as NULL, so
	// a NaN written to the file also reads back as NULL.
	ErrNull = errors.New("NULL value")
	// ErrNotNumeric means that a covariate or outcome holds a text or a blob.
	ErrNotNumeric = errors.New("not a number")
	// ErrNotFinite means that a covariate or outcome is +Inf, -Inf or NaN.
	ErrNotFinite = errors.New("not a finite number")
	// ErrNotBinary means that a covariate declared binary is not 0 or 1.
	ErrNotBinary = errors.New("binary covariate is not 0 or 1")
	// ErrTreatment means that a treatment is not 0 or 1 (NULL included).
	ErrTreatment = errors.New("treatment is not 0 or 1")
	// ErrNullOutcome means that an outcome is NULL.
	ErrNullOutcome = errors.New("outcome is NULL")
	// ErrBinaryOutcome means that a binary outcome is not 0 or 1.
	ErrBinaryOutcome = errors.New("binary outcome is not 0 or 1")
	// ErrEmpty means that there are no rows to train on: the table is empty,
	// or every row was rejected.
	ErrEmpty = errors.New("no rows")
	// ErrNoTreated means that no row has treatment 1.
	ErrNoTreated = errors.New("no treated rows (treatment = 1)")
	// ErrNoControl means that no row has treatment 0.
	ErrNoControl = errors.New("no control rows (treatment = 0)")
	// ErrFewArmRows means that a treatment arm has rows, but too few to
	// train on ([Records.CheckArms]). It arrives in an *[ArmError].
	ErrFewArmRows = errors.New("too few rows in a treatment arm")
)

// Errors of runs and results.
var (
	// ErrNoRun means that the file holds no such run, or no current run.
	ErrNoRun = errors.New("no such run")
	// ErrStaleRun means that a write names a run that is no longer the
	// current one.
	ErrStaleRun = errors.New("run is not the current run")
	// ErrNoModel means that no state is stored for the run and model.
	ErrNoModel = errors.New("no model state")
	// ErrBadResult means that a result to write is malformed: a value that
	// is not finite, an interval with lower > upper, a propensity outside
	// [0, 1], an invalid row id, or a tensor whose shape does not match its
	// values.
	ErrBadResult = errors.New("invalid result")
	// ErrCorrupt means that crffd's own data in the file is damaged.
	ErrCorrupt = errors.New("corrupt crff_ data")
)

// ErrConfig means that a [Source] is invalid. It arrives wrapped in a
// [ConfigError].
var ErrConfig = errors.New("invalid site configuration")

// ConfigError reports an invalid [Source] setting.
type ConfigError struct {
	Key    string // the setting, as in the configuration file: "id_column"
	Reason string // what is wrong with it
}

// Error formats the error as, for example,
//
//	invalid site configuration: id_column: required
func (e *ConfigError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrConfig, e.Key, e.Reason)
}

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

// MaxRowIDs is the number of offending row ids a [ValidationError] names.
const MaxRowIDs = 5

// ValidationError reports records that cannot be used: where the fault is,
// which rows have it and how many. It never holds a record's values.
type ValidationError struct {
	File   string  // the site file
	Table  string  // the configured table or view
	Column string  // the column at fault; empty for the whole table
	Err    error   // the fault: a sentinel such as ErrNull
	RowIDs []RowID // the first (at most MaxRowIDs) offending rows, in read order
	Rows   int     // how many rows have the fault; 0 when not about rows
	Hint   string  // what to do about it, when there is more to say; appended after "; "
}

// Error formats the error as, for example,
//
//	site "a.sqlite", table "records", column "age": NULL value in 7 rows (first ids 4, 9, 17, 21, 30)
func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "site %q, table %q", e.File, e.Table)
	if e.Column != "" {
		fmt.Fprintf(&b, ", column %q", e.Column)
	}
	b.WriteString(": ")
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	} else {
		b.WriteString("invalid records")
	}
	switch {
	case e.Rows == 1 && len(e.RowIDs) == 1:
		fmt.Fprintf(&b, " in 1 row (id %s)", e.RowIDs[0])
	case e.Rows > 0:
		fmt.Fprintf(&b, " in %d rows (", e.Rows)
		if len(e.RowIDs) < e.Rows {
			b.WriteString("first ")
		}
		b.WriteString("ids ")
		for i, id := range e.RowIDs {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(id.String())
		}
		b.WriteString(")")
	}
	if e.Hint != "" {
		b.WriteString("; " + e.Hint)
	}
	return b.String()
}

// Unwrap returns the fault, so that errors.Is(err, ErrNull) works.
func (e *ValidationError) Unwrap() error { return e.Err }
