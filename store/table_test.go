package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crffd/crffd/store"
)

// TestCreateTableRows: rows made one at a time are written as CreateTable
// writes them, a row of the wrong width is refused naming it, and an error
// from the row maker leaves no table.
func TestCreateTableRows(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.sqlite")
	s, err := store.Open(ctx, path, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cols := []store.Column{{Name: "id", Type: store.Integer}, {Name: "x", Type: store.Real}, {Name: "note", Type: store.Text}}
	err = s.CreateTableRows(ctx, "made", cols, 5, func(i int, r []any) error {
		r[0], r[1] = int64(i+1), float64(i)/4
		if i%2 == 0 {
			r[2] = "even"
		}
		return nil
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var sum float64
	var notes int
	if err := rawDB(t, path).QueryRow(`SELECT count(*), sum(x), count(note) FROM made`).Scan(&n, &sum, &notes); err != nil || n != 5 || sum != 2.5 || notes != 3 {
		t.Errorf("made: %d rows, Σx %v, %d notes (%v); want 5, 2.5, 3", n, sum, notes, err)
	}

	bad := errors.New("no such value")
	err = s.CreateTableRows(ctx, "stopped", cols, 5, func(i int, r []any) error {
		if i == 3 {
			return bad
		}
		r[0] = int64(i + 1)
		return nil
	}, false)
	if !errors.Is(err, bad) || !strings.Contains(err.Error(), "row 4") {
		t.Errorf("row maker failing at row 4: %v", err)
	}
	if err := rawDB(t, path).QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'stopped'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("a failed table was left (%d, %v)", n, err)
	}

	// Enough rows for statements of many rows, and a last partial one; a
	// value the driver cannot bind in row 150 fails its statement, and the
	// rows one at a time name it.
	err = s.CreateTableRows(ctx, "many", cols, 200, func(i int, r []any) error {
		r[0], r[1] = int64(i+1), float64(i)
		return nil
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := rawDB(t, path).QueryRow(`SELECT count(*), sum(x) FROM many`).Scan(&n, &sum); err != nil || n != 200 || sum != 19900 {
		t.Errorf("many: %d rows, Σx %v (%v); want 200, 19900", n, sum, err)
	}
	err = s.CreateTableRows(ctx, "unbindable", cols, 200, func(i int, r []any) error {
		r[0] = int64(i + 1)
		if i == 149 {
			r[1] = struct{}{}
		}
		return nil
	}, false)
	if err == nil || !strings.Contains(err.Error(), "row 150:") {
		t.Errorf("an unbindable value in row 150: %v", err)
	}
	if err := rawDB(t, path).QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'unbindable'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("a failed table was left (%d, %v)", n, err)
	}

	err = s.CreateTable(ctx, "narrow", cols, [][]any{{int64(1), 1.0, "a"}, {int64(2), 2.0}}, false)
	if err == nil || !strings.Contains(err.Error(), "row 2 has 2 values for 3 columns") {
		t.Errorf("a row of two values: %v", err)
	}
}
