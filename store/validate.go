package store

import (
	"fmt"
	"math"

	"github.com/crffd/crffd/internal/mapped"
	"github.com/crffd/crffd/records"
)

// chosenHint explains a covariate with values that are not numbers when the
// covariates were chosen automatically: the user may not know it is one.
const chosenHint = "it was chosen as a covariate because it is declared numeric or holds numbers (site.covariates is not set); " +
	"correct them, set site.on_invalid: skip to leave their rows out, or list site.covariates without this column"

// fault is one thing wrong with one row.
type fault struct {
	column string
	err    error
}

// validator collects the rows of one read and what is wrong with them.
type validator struct {
	file    string
	p       *plan
	scoring bool
	ids     []RowID
	w, y    []float64
	x       []float64   // row-major, every row read
	xd      []RowDigest // per row read: valuesDigest of its stored treatment, outcome and covariates
	faults  map[int][]fault
	run     int // the first row of the run of rows with the last row's id
}

// rowArrays are the per-row arrays of a read, but its ids: covariates
// (row-major), treatments, outcomes and digests.
type rowArrays struct {
	x, w, y []float64
	xd      []RowDigest
}

// mapRowArrays returns the arrays of rows rows of cols covariates, each in
// a mapping (package mapped) rather than in the heap: at ten million rows
// they are 3.5 GB of the heap's 4 with thirty covariates.
func mapRowArrays(dir string, rows, cols int) (*rowArrays, error) {
	var a rowArrays
	var err error
	if a.x, err = mapped.Array[float64](dir, rows*cols); err != nil {
		return nil, err
	}
	if a.w, err = mapped.Array[float64](dir, rows); err != nil {
		return nil, err
	}
	if a.y, err = mapped.Array[float64](dir, rows); err != nil {
		return nil, err
	}
	if a.xd, err = mapped.Array[RowDigest](dir, rows); err != nil {
		return nil, err
	}
	return &a, nil
}

// bytes is the size of a's arrays.
func (a *rowArrays) bytes() int {
	return 8*(len(a.x)+len(a.w)+len(a.y)) + len(a.xd)*len(RowDigest{})
}

// newValidator returns the validator of a read of about rows rows (0: not
// known), whose arrays are made for them at once: they become the
// Records' own, so that a read holds its rows once. room, when not nil,
// holds the arrays for them, else they are made in the heap. The ids are
// always the heap's: a text id is a pointer.
func newValidator(file string, p *plan, scoring bool, rows int, room *rowArrays) *validator {
	if room == nil {
		room = &rowArrays{x: make([]float64, 0, rows*len(p.Covariates)),
			w: make([]float64, 0, rows), y: make([]float64, 0, rows), xd: make([]RowDigest, 0, rows)}
	}
	return &validator{
		file: file, p: p, scoring: scoring, faults: map[int][]fault{},
		ids: make([]RowID, 0, rows), w: room.w[:0], y: room.y[:0], x: room.x[:0], xd: room.xd[:0],
	}
}

func (v *validator) fault(i int, column string, err error) {
	v.faults[i] = append(v.faults[i], fault{column, err})
}

// add takes one row: id, treatment, outcome, covariates.
func (v *validator) add(vals []any) error {
	p := v.p
	i := len(v.ids)
	id, err := rowIDOf(vals[0])
	if err != nil {
		return err
	}
	if i == 0 || id != v.ids[i-1] {
		v.endRun(i)
	}
	v.ids = append(v.ids, id)
	if !id.Valid() {
		v.fault(i, p.ID, ErrBadID)
	}

	w, wok := number(vals[1])
	y, yok := number(vals[2])
	if v.scoring {
		// Scoring reads only the covariates: keep what is usable.
		if !wok || !isBit(w) {
			w = math.NaN()
		}
		if !yok || math.IsInf(y, 0) {
			y = math.NaN()
		}
	} else {
		if !wok || !isBit(w) {
			v.fault(i, p.Treatment, ErrTreatment)
		}
		if err := outcomeFault(vals[2], p.BinaryOutcome); err != nil {
			v.fault(i, p.Outcome, err)
		}
	}
	v.w = append(v.w, w)
	v.y = append(v.y, y)

	xd, err := valuesDigest(vals[1:])
	if err != nil {
		return fmt.Errorf("row %s: %w", id, err)
	}
	v.xd = append(v.xd, xd)
	for j, c := range p.Covariates {
		val := vals[3+j]
		if err := covariateFault(val, p.types[j] == typeBinary); err != nil {
			v.fault(i, c, err)
		}
		f, _ := number(val)
		v.x = append(v.x, f)
	}
	return nil
}

// endRun ends the run of rows with one id, which row end does not share:
// the rows read in id order (selectRows), an id that more than one row
// has is a run of them, each a duplicate.
func (v *validator) endRun(end int) {
	if end-v.run > 1 && v.ids[v.run].Valid() {
		for i := v.run; i < end; i++ {
			v.fault(i, v.p.ID, ErrDuplicateID)
		}
	}
	v.run = end
}

// finish checks what needs every row (the last run of ids, counts,
// automatic types) and returns the Records, or the faults as errors.
func (v *validator) finish() (*Records, error) {
	p := v.p
	n, d := len(v.ids), len(p.Covariates)
	v.endRun(n)

	// One ValidationError per (column, fault), in order of first
	// appearance; one Rejection per fault of each row.
	var errs []error
	byFault := map[fault]*ValidationError{}
	var rejected []Rejection
	keep := make([]int, 0, n)
	for i := range n {
		fs := v.faults[i]
		if len(fs) == 0 {
			keep = append(keep, i)
			continue
		}
		for _, f := range fs {
			ve := byFault[f]
			if ve == nil {
				ve = &ValidationError{File: v.file, Table: p.Table, Column: f.column, Err: f.err}
				if f.err == ErrNotNumeric && p.chosen[f.column] {
					ve.Hint = chosenHint
				}
				byFault[f] = ve
				errs = append(errs, ve)
			}
			ve.Rows++
			if len(ve.RowIDs) < MaxRowIDs {
				ve.RowIDs = append(ve.RowIDs, v.ids[i])
			}
			rejected = append(rejected, Rejection{RowID: v.ids[i], Column: f.column, Reason: f.err.Error(), Err: f.err})
		}
	}
	if len(errs) > 0 && p.OnInvalid != Skip {
		return nil, joinFaults(errs)
	}

	recs := &Records{File: v.file, Rejected: rejected, Read: n, Unused: p.unused}
	m := len(keep)
	if m == 0 && !v.scoring {
		return nil, &ValidationError{File: v.file, Table: p.Table, Err: emptyError(n)}
	}
	// The kept rows are moved up over the rejected ones in place (keep is
	// ascending), so that the rows are not copied.
	ids, xd, w, y, x := v.ids[:m], v.xd[:m], v.w[:m], v.y[:m], v.x[:m*d]
	treated := 0
	for k, i := range keep {
		if k != i {
			ids[k], xd[k], w[k], y[k] = v.ids[i], v.xd[i], v.w[i], v.y[i]
			copy(x[k*d:(k+1)*d], v.x[i*d:(i+1)*d])
		}
		if w[k] == 1 {
			treated++
		}
	}
	clear(v.ids[m:]) // the rejected rows' ids, text ones, are not kept alive
	if !v.scoring {
		switch {
		case treated == 0:
			return nil, &ValidationError{File: v.file, Table: p.Table, Column: p.Treatment, Err: ErrNoTreated}
		case treated == m:
			return nil, &ValidationError{File: v.file, Table: p.Table, Column: p.Treatment, Err: ErrNoControl}
		}
	}

	// Settle the automatic types on the rows kept.
	l := p.Layout
	if !v.scoring {
		l.Binary = make([]bool, d)
		for j := range d {
			switch p.types[j] {
			case typeBinary:
				l.Binary[j] = true
			case typeAuto:
				l.Binary[j] = allBits(x[j:], d)
			}
		}
		if p.autoOutcome {
			l.BinaryOutcome = allBits(y, 1)
		}
	}
	recs.Layout = l
	recs.Schema = l.Schema()
	recs.IDs, recs.XDigests = ids, xd
	if m > 0 {
		recs.Data = &records.Data{X: toDense(m, d, x), W: w, Y: y}
	}
	return recs, nil
}

// allBits reports whether every stride-th value of xs, from the first, is 0
// or 1.
func allBits(xs []float64, stride int) bool {
	for i := 0; i < len(xs); i += stride {
		if !isBit(xs[i]) {
			return false
		}
	}
	return true
}
