package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrTooFewChanged means that a site's rows differ from those of an earlier
// run it took part in by at least one row and by fewer than the least
// number of changed rows allowed ([Site.JoinRun]). It arrives in a
// [*RowChangeError].
var ErrTooFewChanged = errors.New("rows differ too little from an earlier run")

// ErrRunRowsChanged means that a site rejoining a run it began (after a
// restart) no longer has the rows it began the run with ([Site.JoinRun]).
var ErrRunRowsChanged = errors.New("rows changed since the run began")

// RowDigest is the SHA-256 of the values a row is trained on: its
// covariates, treatment and outcome as read for training (see
// [Records.Digests]).
type RowDigest [sha256.Size]byte

// RowChange counts how the rows of a run differ from those of an earlier
// run, matched by row id.
type RowChange struct {
	Run     string // the earlier run
	Added   int    // ids present now, not then
	Deleted int    // ids present then, not now
	Edited  int    // ids present in both whose values differ
}

// Total returns the size of the symmetric difference of the two row sets,
// counting an edited row once.
func (c RowChange) Total() int { return c.Added + c.Deleted + c.Edited }

// CompareRows counts how the rows now differ from the rows then, both given
// as digest by row id.
func CompareRows(then, now map[RowID]RowDigest) RowChange {
	var c RowChange
	for id, d := range now {
		was, ok := then[id]
		switch {
		case !ok:
			c.Added++
		case was != d:
			c.Edited++
		}
	}
	for id := range then {
		if _, ok := now[id]; !ok {
			c.Deleted++
		}
	}
	return c
}

// RowChangeError reports a run refused because the site's rows differ from
// those of an earlier run by too few rows. It names no row.
type RowChangeError struct {
	Site  string // the site's federation name
	Least int    // the fewest changed rows a run may have, besides none
	RowChange
}

// Error formats the error as, for example,
//
//	site2: its rows differ from those of run R by 2 (added 1, deleted 0, edited 1); a run is refused until they differ by at least 5 or not at all
func (e *RowChangeError) Error() string {
	return fmt.Sprintf("%s: its rows differ from those of run %s by %d (added %d, deleted %d, edited %d); a run is refused until they differ by at least %d or not at all",
		e.Site, e.Run, e.Total(), e.Added, e.Deleted, e.Edited, e.Least)
}

// Unwrap returns ErrTooFewChanged.
func (e *RowChangeError) Unwrap() error { return ErrTooFewChanged }

// Digests returns the digest of every kept row, by row id. A row's digest
// is the SHA-256 of its covariates, treatment and outcome as float64 bits,
// in that order: the values its sums and gradients are computed from.
func (r *Records) Digests() map[RowID]RowDigest {
	out := make(map[RowID]RowDigest, len(r.IDs))
	if r.Data == nil {
		return out
	}
	_, p := r.Data.X.Dims()
	buf := make([]byte, 0, 8*(p+2))
	for i, id := range r.IDs {
		buf = buf[:0]
		for j := range p {
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(r.Data.X.At(i, j)))
		}
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(r.Data.W[i]))
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(r.Data.Y[i]))
		out[id] = sha256.Sum256(buf)
	}
	return out
}

// JoinRun records, in crff_run_rows, that the site named site takes part
// in run with the rows recs, after checking them against the rows of every
// run recorded before: when they differ from those of any one by at least
// one and fewer than least rows (added, deleted or edited), it records
// nothing and fails with a [*RowChangeError] (ErrTooFewChanged). Rows that
// are the same as an earlier run's, or differ by least or more, pass. It
// must be called before the site sends anything computed from recs for
// run, so that a refused run leaves no record and a run that sent anything
// always has one.
//
// The check is pairwise: the difference of two runs' sums (moments and
// gradients) spans least rows or none. Combinations of three or more runs
// are not excluded: with least 5, runs over rows A, A+B, A+C and A+B+C,
// where B and C hold 6 rows each and share one, pass every pairwise check,
// yet the sums of the second and third less those of the first and fourth
// are the shared row's values. Only noise or secure aggregation would
// prevent that.
//
// A run recorded already is one the site is rejoining after a restart. Its
// rows must be exactly those recorded, which the run's first hello, its
// de-duplication verdict and every gradient so far were computed from:
// otherwise JoinRun fails with ErrRunRowsChanged, naming the counts. This
// catches rows edited in place, which a row count does not. The record is
// left as it is.
func (s *Site) JoinRun(ctx context.Context, site, run string, recs *Records, least int) error {
	now := recs.Digests()
	return s.writeTx(ctx, "record the rows of run "+run+" in", func(tx *sql.Tx) error {
		// A rejoin whose rows changed is reported as such, even when an
		// earlier run would also refuse them.
		var rejoined bool
		var changed, tooFew error
		err := eachRunRows(ctx, tx, func(r string, then map[RowID]RowDigest) error {
			c := CompareRows(then, now)
			c.Run = r
			switch n := c.Total(); {
			case r == run:
				rejoined = true
				if n != 0 {
					changed = fmt.Errorf("%w: site %s: its rows differ from those it began run %s with by %d (added %d, deleted %d, edited %d)",
						ErrRunRowsChanged, site, run, n, c.Added, c.Deleted, c.Edited)
				}
			case tooFew == nil && n >= 1 && n < least:
				tooFew = &RowChangeError{Site: site, Least: least, RowChange: c}
			}
			return nil
		})
		switch {
		case err != nil:
			return err
		case changed != nil:
			return changed
		case tooFew != nil:
			return tooFew
		case rejoined:
			return nil
		}
		st, err := tx.PrepareContext(ctx, `INSERT INTO crff_run_rows (run, row_id, digest) VALUES (?, ?, ?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, id := range recs.IDs {
			d := now[id]
			if _, err := st.ExecContext(ctx, run, id, d[:]); err != nil {
				return fmt.Errorf("row %s: %w", id, err)
			}
		}
		return nil
	})
}

// eachRunRows calls fn with the recorded digests of each run in turn, in
// the order of the run ids, so that the same run is named on every try and
// memory holds one run's rows at a time rather than every run's.
func eachRunRows(ctx context.Context, q querier, fn func(run string, rows map[RowID]RowDigest) error) error {
	rows, err := q.QueryContext(ctx, `SELECT run, row_id, digest FROM crff_run_rows ORDER BY run`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		cur  string
		runs map[RowID]RowDigest
	)
	for rows.Next() {
		var (
			run string
			id  RowID
			d   []byte
		)
		if err := rows.Scan(&run, &id, &d); err != nil {
			return err
		}
		if len(d) != sha256.Size || !id.Valid() {
			return fmt.Errorf("%w: crff_run_rows: row %s of run %q", ErrCorrupt, id, run)
		}
		if runs == nil || run != cur {
			if runs != nil {
				if err := fn(cur, runs); err != nil {
					return err
				}
			}
			cur, runs = run, map[RowID]RowDigest{}
		}
		runs[id] = RowDigest(d)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if runs == nil {
		return nil
	}
	return fn(cur, runs)
}
