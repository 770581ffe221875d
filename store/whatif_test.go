package store_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/crffd/crffd/store"
)

// TestWhatIfRows: publishing a run creates crff_whatif with an id and the
// run's covariates; rows that need scoring come back once, faulty ones
// with a reason naming the column, and again only when edited; deleted
// rows lose their result.
func TestWhatIfRows(t *testing.T) {
	ctx := context.Background()
	path, s, _, _, _, _, _ := gateSite(t, 50)
	db := rawDB(t, path)
	cols := map[string]string{}
	rs, err := db.Query(`SELECT name, type FROM pragma_table_info('crff_whatif')`)
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var n, ty string
		if err := rs.Scan(&n, &ty); err != nil {
			t.Fatal(err)
		}
		cols[n] = ty
	}
	rs.Close()
	if cols["id"] != "INTEGER" || cols["age"] != "REAL" || cols["sex"] != "INTEGER" || len(cols) != 3 {
		t.Fatalf("crff_whatif columns %v, want id, age and sex", cols)
	}
	execSQL(t, path, `INSERT INTO crff_whatif (id, age, sex) VALUES (1, 70, 1), (2, 30, 0), (3, NULL, 1), (4, 'old', 0), (5, 50, 2), (6, ' 41.5 ', 1)`)
	w, err := s.WhatIfRows(ctx, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(w.IDs) != 3 || w.IDs[0] != 1 || w.IDs[1] != 2 || w.IDs[2] != 6 || w.Data.X.At(2, 0) != 41.5 || w.Data.X.At(0, 1) != 1 {
		t.Fatalf("rows to score %v, want 1, 2 and 6 with their values", w.IDs)
	}
	want := map[int64]string{3: `column "age": NULL value`, 4: `column "age": not a number`, 5: `column "sex": binary covariate is not 0 or 1`}
	for _, f := range w.Faults {
		if want[f.ID] != f.Reason {
			t.Errorf("row %d: %q, want %q", f.ID, f.Reason, want[f.ID])
		}
		delete(want, f.ID)
	}
	if len(want) != 0 {
		t.Errorf("faults not reported: %v", want)
	}
	cates := []store.WhatIfCATE{{ID: 1, CATE: 2, Lower: 1, Upper: 3}, {ID: 2, CATE: 1, Lower: 0, Upper: 2}, {ID: 6, CATE: 1.5, Lower: 0.5, Upper: 2.5}}
	if err := s.WriteWhatIf(ctx, "run-1", w, cates[:2]); !errors.Is(err, store.ErrBadResult) {
		t.Errorf("too few CATEs: %v, want ErrBadResult", err)
	}
	if err := s.WriteWhatIf(ctx, "run-1", w, cates); err != nil {
		t.Fatal(err)
	}
	var cate sql.NullFloat64
	var reason sql.NullString
	if err := db.QueryRow(`SELECT cate, error FROM crff_whatif_cate WHERE id = 4`).Scan(&cate, &reason); err != nil || cate.Valid || reason.String != `column "age": not a number` {
		t.Errorf("row 4: %v, %v (%v)", cate, reason, err)
	}
	if err := db.QueryRow(`SELECT cate FROM crff_whatif_cate WHERE id = 1`).Scan(&cate); err != nil || cate.Float64 != 2 {
		t.Errorf("row 1: %v (%v)", cate, err)
	}
	// Nothing new: nothing to score.
	if w, err = s.WhatIfRows(ctx, "run-1"); err != nil || len(w.IDs)+len(w.Faults) != 0 {
		t.Fatalf("unchanged rows: %v, %v (%v)", w.IDs, w.Faults, err)
	}
	// An edit and a mend bring rows back; a deletion drops a result.
	execSQL(t, path, `UPDATE crff_whatif SET age = 71 WHERE id = 1; UPDATE crff_whatif SET age = 60 WHERE id = 3; DELETE FROM crff_whatif WHERE id = 2`)
	if w, err = s.WhatIfRows(ctx, "run-1"); err != nil || len(w.IDs) != 2 || w.IDs[0] != 1 || w.IDs[1] != 3 || len(w.Stale) != 1 || w.Stale[0] != 2 {
		t.Fatalf("after edits: %v, stale %v (%v); want 1 and 3, and 2 stale", w.IDs, w.Stale, err)
	}
	if err := s.WriteWhatIf(ctx, "run-1", w, []store.WhatIfCATE{{ID: 1, CATE: 2.1, Lower: 1, Upper: 3}, {ID: 3, CATE: 1, Lower: 0, Upper: 2}}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM crff_whatif_cate WHERE id = 2`).Scan(&n); err != nil || n != 0 {
		t.Errorf("the deleted row's result: %d rows (%v)", n, err)
	}
	// Without crff_whatif nothing is scored, and every result is stale.
	execSQL(t, path, `DROP TABLE crff_whatif`)
	if w, err = s.WhatIfRows(ctx, "run-1"); err != nil || len(w.IDs)+len(w.Faults) != 0 || len(w.Stale) != 5 {
		t.Fatalf("without crff_whatif: %+v (%v); want 5 stale results", w, err)
	}
}

// TestWhatIfTableOfTheUser: a crff_whatif without the run's covariates is
// an error that names the missing one.
func TestWhatIfTableOfTheUser(t *testing.T) {
	path, s, _, _, _, _, _ := gateSite(t, 50)
	execSQL(t, path, `DROP TABLE crff_whatif; CREATE TABLE crff_whatif (id INTEGER PRIMARY KEY, age REAL)`)
	_, err := s.WhatIfRows(context.Background(), "run-1")
	if err == nil || !strings.Contains(err.Error(), `crff_whatif has no column "sex"`) {
		t.Errorf("err %v", err)
	}
}
