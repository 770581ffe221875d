package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/crffd/crffd/store"
)

func TestCompareRows(t *testing.T) {
	d := func(b byte) store.RowDigest { return store.RowDigest{b} }
	id := store.IntID
	base := map[store.RowID]store.RowDigest{id(1): d(1), id(2): d(2), id(3): d(3)}
	for _, tc := range []struct {
		name string
		now  map[store.RowID]store.RowDigest
		want store.RowChange
	}{
		{"none", map[store.RowID]store.RowDigest{id(1): d(1), id(2): d(2), id(3): d(3)}, store.RowChange{}},
		{"added", map[store.RowID]store.RowDigest{id(1): d(1), id(2): d(2), id(3): d(3), id(4): d(4)}, store.RowChange{Added: 1}},
		{"deleted", map[store.RowID]store.RowDigest{id(1): d(1), id(3): d(3)}, store.RowChange{Deleted: 1}},
		{"edited", map[store.RowID]store.RowDigest{id(1): d(1), id(2): d(9), id(3): d(3)}, store.RowChange{Edited: 1}},
		{"text id is another row", map[store.RowID]store.RowDigest{id(1): d(1), id(2): d(2), store.TextID("3"): d(3)}, store.RowChange{Added: 1, Deleted: 1}},
		{"all three", map[store.RowID]store.RowDigest{id(1): d(8), id(3): d(3), id(5): d(5), id(6): d(6)}, store.RowChange{Added: 2, Deleted: 1, Edited: 1}},
		{"empty now", nil, store.RowChange{Deleted: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := store.CompareRows(base, tc.now)
			if got != tc.want {
				t.Errorf("CompareRows = %+v, want %+v", got, tc.want)
			}
			if got.Total() != tc.want.Added+tc.want.Deleted+tc.want.Edited {
				t.Errorf("Total = %d", got.Total())
			}
		})
	}
}

// TestJoinRun records runs in a site file and checks each new run's rows
// against every recorded run, not only the last.
func TestJoinRun(t *testing.T) {
	ctx := context.Background()
	path := newRecordsFile(t)
	s := openSite(t, path)
	src := recordsSource(path)
	src.Covariates = []string{"age", "smoker", "bmi"}
	const least = 3
	// Each step changes the table, then joins a run: want is "" when the
	// run is recorded, else the refusal's text.
	for _, step := range []struct {
		name, change, run, want string
		err                     error // the refusal's sentinel; nil for ErrTooFewChanged
	}{
		{"first run", ``, "run-1", "", nil},
		{"same rows again", ``, "run-2", "", nil},
		{"one row added", `INSERT INTO records VALUES (13, 40, 0, 25, NULL, NULL, 1, 2, 1)`, "run-3",
			"site2: its rows differ from those of run run-1 by 1 (added 1, deleted 0, edited 0); a run is refused until they differ by at least 3 or not at all", nil},
		{"one added, one edited", `UPDATE records SET outcome = 9 WHERE patient_id = 2`, "run-3",
			"site2: its rows differ from those of run run-1 by 2 (added 1, deleted 0, edited 1)", nil},
		{"one added, one edited, one deleted", `DELETE FROM records WHERE patient_id = 12`, "run-3", "", nil},
		{"back to run-1 but for one edit: refused by run-1", `DELETE FROM records WHERE patient_id = 13;
			INSERT INTO records VALUES (12, 35.0, 1, 30.1, NULL, '2024-01-15', 0, 1.25, 0)`, "run-4",
			"site2: its rows differ from those of run run-1 by 1 (added 0, deleted 0, edited 1)", nil},
		{"run-3's rows again, two runs back", `DELETE FROM records WHERE patient_id = 12;
			INSERT INTO records VALUES (13, 40, 0, 25, NULL, NULL, 1, 2, 1)`, "run-4", "", nil},
		{"a covariate edited, far from run-1 but near run-3", `UPDATE records SET bmi = 20 WHERE patient_id = 1`, "run-5",
			"site2: its rows differ from those of run run-3 by 1 (added 0, deleted 0, edited 1)", nil},
		{"the site rejoins a recorded run with its rows", `UPDATE records SET bmi = 22.1 WHERE patient_id = 1`, "run-4", "", nil},
		{"the site rejoins it with a row edited in place", `UPDATE records SET bmi = 23 WHERE patient_id = 1`, "run-4",
			"site2: its rows differ from those it began run run-4 with by 1 (added 0, deleted 0, edited 1)", store.ErrRunRowsChanged},
		{"the site rejoins it with as many edits as least allows", `UPDATE records SET bmi = 22.1 WHERE patient_id = 1;
			UPDATE records SET outcome = outcome + 1 WHERE patient_id <= 3`, "run-4",
			"site2: its rows differ from those it began run run-4 with by 3 (added 0, deleted 0, edited 3)", store.ErrRunRowsChanged},
	} {
		if step.change != "" {
			execSQL(t, path, step.change)
		}
		recs, err := s.ReadRecords(ctx, src)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		before := recordedRuns(t, path)
		err = s.JoinRun(ctx, "site2", step.run, recs, least)
		after := recordedRuns(t, path)
		if step.want == "" {
			if err != nil {
				t.Fatalf("%s: JoinRun: %v", step.name, err)
			}
			if !strings.Contains(after, step.run+":") {
				t.Errorf("%s: %s not recorded: %s", step.name, step.run, after)
			}
			continue
		}
		if step.err == nil {
			var ce *store.RowChangeError
			if !errors.Is(err, store.ErrTooFewChanged) || !errors.As(err, &ce) || !strings.Contains(err.Error(), step.want) {
				t.Fatalf("%s: JoinRun: %v, want ErrTooFewChanged: %s", step.name, err, step.want)
			}
		} else if !errors.Is(err, step.err) || !strings.Contains(err.Error(), step.want) {
			t.Fatalf("%s: JoinRun: %v, want %v: %s", step.name, err, step.err, step.want)
		}
		if after != before {
			t.Errorf("%s: a refused run changed crff_run_rows from %s to %s", step.name, before, after)
		}
	}
	if got, want := recordedRuns(t, path), "run-1:12 run-2:12 run-3:12 run-4:12"; got != want {
		t.Errorf("crff_run_rows holds %s, want %s", got, want)
	}
}

// recordedRuns lists the runs of crff_run_rows with their row counts.
func recordedRuns(t *testing.T, path string) string {
	t.Helper()
	rows, err := rawDB(t, path).Query(`SELECT run || ':' || count(*) FROM crff_run_rows GROUP BY run ORDER BY run`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}
