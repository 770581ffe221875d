package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/records"
	"github.com/crffd/crffd/sqlfiles"
)

// Records are a site's rows as read through its Source and validated.
// Row i of Data describes the record with id IDs[i].
type Records struct {
	File   string         // the site file the rows were read from
	Layout Layout         // the resolved configuration the rows were read with
	Schema records.Schema // Layout.Schema()
	IDs    []RowID        // per kept row, in ascending id order
	// XDigests are, per kept row, the digest of its treatment, outcome and
	// covariates as stored; a CATE written with its row's digest
	// (CATE.XDigest) is dropped and the row scored again once one of them
	// changes (see [Site.ForgetEdited]): the covariates change its CATE,
	// and all three its AIPW score.
	XDigests []RowDigest
	Data     *records.Data // the kept rows; nil when there are none
	Rejected []Rejection   // with on_invalid: skip, the faults of the rows left out
	Read     int           // rows read, kept or not
	// Unused lists, when the covariates are not configured, the other
	// columns that are not covariates because they hold no number, with
	// why (see [Source]); callers say so, so that no column is left out
	// silently.
	Unused []UnusedColumn
	// validating is, for a sample (SampleRecords), the time spent
	// validating the rows kept.
	validating time.Duration
	// mapped reports covariates kept in a mapping (Options.MapRows).
	mapped bool
}

// UnusedColumn is a column of the table left out of the covariates when
// they are chosen automatically.
type UnusedColumn struct {
	Name   string // as the table spells it
	Reason string // why, such as "none of its 300 values is a number"
}

// Len returns the number of kept rows.
func (r *Records) Len() int { return len(r.IDs) }

// Rejection is one fault of a row left out by on_invalid: skip. A row with
// several faults has several Rejections.
type Rejection struct {
	RowID  RowID
	Column string // the column at fault
	Reason string // what is wrong, as stored in crff_rejected.reason
	Err    error  // the sentinel, such as ErrNull; nil when read back from the file
	Run    string // set when read back from the file
}

// DescribeRejections counts the rows left out by column, in words, with
// the first three row ids of each, for example "2 rows for column
// severity (ids 5, 17)", and says where crffd fit lists them all.
func DescribeRejections(rej []Rejection) string {
	type fault struct {
		n   int
		ids []string
	}
	var order []string
	by := map[string]*fault{}
	for _, r := range rej {
		f, ok := by[r.Column]
		if !ok {
			f = &fault{}
			by[r.Column] = f
			order = append(order, r.Column)
		}
		f.n++
		if len(f.ids) < 3 {
			f.ids = append(f.ids, r.RowID.String())
		}
	}
	parts := make([]string, len(order))
	for i, c := range order {
		f := by[c]
		parts[i] = fmt.Sprintf("%d rows for column %s (ids %s%s)", f.n, c, strings.Join(f.ids, ", "), map[bool]string{true: ", …"}[f.n > len(f.ids)])
	}
	return strings.Join(parts, "; ") + "; crff_rejected lists them after crffd fit with site.on_invalid: skip"
}

// ReadRecords reads the site's records through src's table or view and
// validates them for training. Rows are read in ascending id order.
//
// Every fault has its own error, naming the file, the table, the column and
// the first offending row ids (see [ValidationError]): a missing table or
// column, an id that is NULL or not an integer or text, a duplicate id, a
// covariate that is NULL, a text or blob that is not a number, ±Inf or NaN
// (or not 0/1 when declared binary), a treatment other than 0/1, a NULL or
// non-finite outcome, a binary outcome other than 0/1, no rows, no treated
// or no control rows. A text that spells a number is read as that number
// (see [Source]). With the covariates chosen automatically, the columns
// left out are listed in Records.Unused.
//
// With on_invalid: refuse, any fault fails the read; several faults come
// back joined with errors.Join, each testable with errors.Is and errors.As.
// With on_invalid: skip, the rows at fault are left out and listed in
// Records.Rejected (for WriteResults to store in crff_rejected), but a site
// left with no rows, no treated or no control rows is still an error.
//
// ReadRecords only reads the file.
func (s *Site) ReadRecords(ctx context.Context, src Source) (*Records, error) {
	if err := src.Validate(); err != nil {
		return nil, fmt.Errorf("read records from %q: %w", s.path, err)
	}
	var recs *Records
	err := s.readTx(ctx, "read records from", func(tx *sql.Tx) error {
		p, err := s.resolve(ctx, tx, src)
		if err != nil {
			return err
		}
		recs, err = s.readRows(ctx, tx, p, false, 1, -1)
		return err
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// Sample is what SampleRecords read: every Stride-th row of the table.
type Sample struct {
	*Records
	Rows   int // the table's rows, every one of which was read
	Stride int
	// Validate is the time spent validating the kept rows, which
	// ReadRecords spends on every row: the rest of a sample's read is
	// what reading every row costs.
	Validate time.Duration
}

// SampleRecords reads the table as ReadRecords does, but keeps only every
// stride-th row in id order (the first, the stride+1-th, …), the stride
// chosen to keep about rows of them, so that a fit's cost can be measured
// on a sample before it starts. Every row is still read from the file, so
// the sample costs a read of the table but holds only its kept rows.
// Faults in rows not kept are not seen.
func (s *Site) SampleRecords(ctx context.Context, src Source, rows int) (*Sample, error) {
	if err := src.Validate(); err != nil {
		return nil, fmt.Errorf("sample records from %q: %w", s.path, err)
	}
	out := &Sample{}
	err := s.readTx(ctx, "sample records from", func(tx *sql.Tx) error {
		p, err := s.resolve(ctx, tx, src)
		if err != nil {
			return err
		}
		n, err := countRows(ctx, tx, p.Table)
		if err != nil {
			return err
		}
		out.Stride = max(n/max(rows, 1), 1)
		out.Records, err = s.readRows(ctx, tx, p, false, out.Stride, n/out.Stride+1)
		if err != nil {
			return err
		}
		out.Rows, out.Validate = out.Read, out.validating
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// UnscoredRows reads, through the current run's layout, the rows of the
// user's table that have no CATE in crff_cate: rows added after the run's
// results were written, or edited since they were scored
// (ForgetEdited), and rows rejected before, whose faults may have been
// mended since. They are
// validated as ReadRecords does, with the current run's covariate types and
// on_invalid policy, but only the id and the covariates are required, since
// scoring reads only Data.X: W and Y hold the treatment and outcome where
// they are valid numbers and NaN elsewhere. When no row is waiting, the
// Records are empty and Data is nil. It fails with ErrNoRun when no run is
// current.
func (s *Site) UnscoredRows(ctx context.Context) (*Records, error) {
	var recs *Records
	err := s.readTx(ctx, "read unscored rows from", func(tx *sql.Tx) error {
		run, err := currentRun(ctx, tx)
		if err != nil {
			return err
		}
		p := &plan{Layout: run.Layout}
		for _, b := range run.Layout.Binary {
			t := typeContinuous
			if b {
				t = typeBinary
			}
			p.types = append(p.types, t)
		}
		recs, err = s.readRows(ctx, tx, p, true, 1, 0)
		return err
	})
	return recs, err
}

// readRows reads and validates the rows of p's table: all of them for
// training, or only those without a CATE or rejection for scoring.
// With stride > 1 only every stride-th row is validated and kept; Read
// still counts every row, and Records.validating is the time spent
// validating them. expect is the rows expected, which the read's arrays are
// made for at once: a count, or −1 to count the table's rows first (in the
// same transaction, so the count is exact), or 0 for none known.
func (s *Site) readRows(ctx context.Context, q querier, p *plan, scoring bool, stride, expect int) (*Records, error) {
	query, err := selectRows(p.Layout, scoring)
	if err != nil {
		return nil, err
	}
	if expect < 0 {
		if expect, err = countRows(ctx, q, p.Table); err != nil {
			return nil, err
		}
	}
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var room *rowArrays
	if n := expect * len(p.Covariates); s.mapRows > 0 && n >= s.mapRows && !scoring {
		// Where the system has no unnamed files the heap serves.
		if room, err = mapRowArrays(filepath.Dir(s.path), expect, len(p.Covariates)); err != nil {
			s.log.DebugContext(ctx, "rows kept in the heap", "path", s.path, "reason", err.Error())
			room = nil
		} else {
			// What crffd writes beside the site file is said: the
			// folder and the size, never a value.
			s.log.InfoContext(ctx, "rows kept in unnamed temporary files", "path", s.path,
				"folder", filepath.Dir(s.path), "bytes", room.bytes())
		}
	}
	v := newValidator(s.path, p, scoring, expect, room)
	vals := make([]any, 3+len(p.Covariates))
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	read := 0
	var validating time.Duration
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		read++
		if stride > 1 {
			if (read-1)%stride != 0 {
				continue
			}
			t := time.Now()
			err := v.add(vals)
			validating += time.Since(t)
			if err != nil {
				return nil, err
			}
			continue
		}
		if err := v.add(vals); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	t := time.Now()
	recs, err := v.finish()
	if err != nil {
		return nil, err
	}
	if stride > 1 {
		recs.Read, recs.validating = read, validating+time.Since(t)
	}
	// The covariates are in the mapping unless more rows came than were
	// counted and appending moved them to the heap.
	recs.mapped = room != nil && recs.Data != nil && &recs.Data.X.RawMatrix().Data[0] == &room.x[0]
	return recs, nil
}

// countRows returns the rows of table.
func countRows(ctx context.Context, q querier, table string) (int, error) {
	qt, err := sqlfiles.QuoteIdent(table)
	if err != nil {
		return 0, err
	}
	var n int
	err = q.QueryRowContext(ctx, `SELECT count(*) FROM `+qt).Scan(&n)
	return n, err
}

// selectRows returns the query that reads p's columns: id, treatment,
// outcome, then the covariates. Each column is read as +"name", an
// expression without declared type, so that the driver hands over values
// exactly as stored (it would turn a text in a DATE column into a time).
func selectRows(l Layout, scoring bool) (string, error) {
	qt, err := sqlfiles.QuoteIdent(l.Table)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("SELECT ")
	for i, c := range append([]string{l.ID, l.Treatment, l.Outcome}, l.Covariates...) {
		qc, err := sqlfiles.QuoteIdent(c)
		if err != nil {
			return "", err
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("+r." + qc)
	}
	b.WriteString(" FROM " + qt + " AS r")
	if scoring {
		qi, _ := sqlfiles.QuoteIdent(l.ID)
		// Rows with crff_rejected lines are read again: their faults
		// may have been mended (AppendScores keeps unchanged lines).
		fmt.Fprintf(&b, " WHERE NOT EXISTS (SELECT 1 FROM crff_cate AS c WHERE c.row_id = +r.%[1]s)", qi)
	}
	// Rows come in id order. Ids that SQLite orders as equal but that are
	// not the same value (1 and 1.0, or 'A' and 'a' under a NOCASE
	// collation) are ordered by storage class and bytes, so that equal
	// ids are always next to each other and the duplicates are found by
	// comparing each id with the one before.
	qi, _ := sqlfiles.QuoteIdent(l.ID)
	fmt.Fprintf(&b, " ORDER BY 1, typeof(+r.%[1]s), +r.%[1]s COLLATE BINARY", qi)
	return b.String(), nil
}

// number returns v as a float64 and true when it is a number: stored by
// SQLite as an integer or a real, or a text that spells a number as crffd
// import reads one (see [numericText]), as in a column that was imported as
// TEXT because of a few values that are not numbers.
func number(v any) (float64, bool) {
	switch v := v.(type) {
	case int64:
		return float64(v), true
	case float64:
		return v, true
	case string:
		return numericText(v)
	}
	return 0, false
}

// numericText reads a text as a number when crffd import would have stored
// it as one: a decimal integer or real with an optional sign and
// surrounding spaces, or inf, infinity or nan (which then fail as not
// finite). A number with a leading zero such as 007, or an integer too
// long for 64 bits, is a code, not a number, as on import.
func numericText(s string) (float64, bool) {
	switch classify(s) {
	case intNumber, realNumber:
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0, false
		}
		return f, true // out of range: ±Inf or 0, as SQLite itself would read it
	case nanNumber:
		return math.NaN(), true
	}
	return 0, false
}

// isBit reports whether f is 0 or 1.
func isBit(f float64) bool { return f == 0 || f == 1 }

// covariateFault returns the fault of covariate value v, or nil.
func covariateFault(v any, binary bool) error {
	f, ok := number(v)
	switch {
	case v == nil:
		return ErrNull
	case !ok:
		return ErrNotNumeric
	case math.IsNaN(f) || math.IsInf(f, 0):
		return ErrNotFinite
	case binary && !isBit(f):
		return ErrNotBinary
	}
	return nil
}

// outcomeFault returns the fault of outcome value v, or nil.
func outcomeFault(v any, binary bool) error {
	f, ok := number(v)
	switch {
	case v == nil:
		return ErrNullOutcome
	case !ok:
		return ErrNotNumeric
	case math.IsNaN(f) || math.IsInf(f, 0):
		return ErrNotFinite
	case binary && !isBit(f):
		return ErrBinaryOutcome
	}
	return nil
}

// emptyError is ErrEmpty, saying why when rows were read.
func emptyError(read int) error {
	if read == 0 {
		return ErrEmpty
	}
	return fmt.Errorf("%w: all %d rows were rejected", ErrEmpty, read)
}

// joinFaults returns the one error, or the errors joined.
func joinFaults(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// toDense returns the n×d matrix of rows, or nil when n is 0.
func toDense(n, d int, flat []float64) *mat.Dense {
	if n == 0 || d == 0 {
		return nil
	}
	return mat.NewDense(n, d, flat)
}
