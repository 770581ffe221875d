package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/crffd/crffd/store"
)

func TestRunLog(t *testing.T) {
	ctx := context.Background()
	s := openSite(t, newRecordsFile(t))
	for _, e := range []store.RunEnd{
		{Run: "r1", Status: store.RunRefused, Reason: "too few rows"},
		{Run: "r2", Status: store.RunCompleted},
		{Run: "r1", Status: store.RunCompleted},
	} {
		if err := s.LogRun(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.RunLog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// r1's refusal was replaced by its completion; the order of two runs
	// that ended within one clock tick is not specified.
	if len(got) != 2 || fmt.Sprint(got) != "[{r1 completed } {r2 completed }]" && fmt.Sprint(got) != "[{r2 completed } {r1 completed }]" {
		t.Errorf("run log %v", got)
	}
	for _, bad := range []store.RunEnd{{Run: "r3", Status: "lost"}, {Status: store.RunFailed}} {
		if err := s.LogRun(ctx, bad); !errors.Is(err, store.ErrBadResult) {
			t.Errorf("%+v: %v, want store.ErrBadResult", bad, err)
		}
	}
}

// TestForgetEdited: a CATE written with its row's digest is dropped once
// the row's treatment, outcome or a covariate is edited, and the row is
// unscored again; edits of a column that is not used keep it, as do CATEs
// written without a digest.
func TestForgetEdited(t *testing.T) {
	ctx := context.Background()
	path, s, recs := begunRun(t)
	res := fakeResults(recs.IDs, 1)
	for i := range res.CATE {
		if i != 3 { // row 4 is kept without a digest
			res.CATE[i].XDigest = &recs.XDigests[i]
		}
	}
	if err := s.WriteResults(ctx, "run-1", res); err != nil {
		t.Fatal(err)
	}
	if n, err := s.ForgetEdited(ctx, "run-1"); err != nil || n != 0 {
		t.Fatalf("nothing edited: %d, %v", n, err)
	}
	execSQL(t, path, `UPDATE records SET note = 'x', bmi = 40 WHERE patient_id IN (1, 2)`)
	execSQL(t, path, `UPDATE records SET age = 35 WHERE patient_id = 4`)
	if n, err := s.ForgetEdited(ctx, "run-1"); err != nil || n != 0 {
		t.Fatalf("only other columns, or a row without a digest, edited: %d, %v", n, err)
	}
	// The treatment and the outcome enter the row's AIPW score.
	execSQL(t, path, `UPDATE records SET treated = 1 - treated WHERE patient_id = 1`)
	execSQL(t, path, `UPDATE records SET outcome = 9 WHERE patient_id = 2`)
	if n, err := s.ForgetEdited(ctx, "run-1"); err != nil || n != 2 {
		t.Fatalf("rows 1 and 2's treatment and outcome edited: %d, %v", n, err)
	}
	execSQL(t, path, `UPDATE records SET age = age + 1 WHERE patient_id = 5`)
	execSQL(t, path, `UPDATE records SET smoker = 1 WHERE patient_id = 6`)
	// Row 7's age is 44.0 already: REAL affinity stores 44 as 44.0, so
	// this update is no edit.
	execSQL(t, path, `UPDATE records SET age = 44 WHERE patient_id = 7`)
	if n, err := s.ForgetEdited(ctx, "run-1"); err != nil || n != 2 {
		t.Fatalf("rows 5 and 6 edited: %d, %v", n, err)
	}
	again, err := s.UnscoredRows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(again.IDs) != "[1 2 5 6]" || again.XDigests[2] == recs.XDigests[4] {
		t.Errorf("unscored again: %v", again.IDs)
	}
	// The digest Go computes when it reads a row is the one SQL computes
	// from the stored values, for every storage class: a new row with a
	// text outcome and a blob treatment (scoring reads them as missing)
	// keeps its CATE until it is edited.
	execSQL(t, path, `INSERT INTO records (patient_id, treated, outcome, age, smoker) VALUES (20, x'01', 'n/a', 33.5, 0)`)
	fresh, err := s.UnscoredRows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	scored := fakeResults(fresh.IDs, 2).CATE
	for i := range scored {
		scored[i].XDigest = &fresh.XDigests[i]
	}
	if _, err := s.AppendScores(ctx, "run-1", scored, nil); err != nil {
		t.Fatal(err)
	}
	if n, err := s.ForgetEdited(ctx, "run-1"); err != nil || n != 0 {
		t.Errorf("rows scored with Go's digests, unedited: %d forgotten, %v", n, err)
	}
	execSQL(t, path, `UPDATE records SET outcome = 'n/a ' WHERE patient_id = 20`)
	if n, err := s.ForgetEdited(ctx, "run-1"); err != nil || n != 1 {
		t.Errorf("row 20's text outcome edited: %d forgotten, %v", n, err)
	}
	if _, err := s.ForgetEdited(ctx, "run-0"); !errors.Is(err, store.ErrStaleRun) {
		t.Errorf("forgot the scores of a run that does not exist: %v, want ErrStaleRun", err)
	}
}
