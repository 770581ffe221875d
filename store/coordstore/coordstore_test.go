package coordstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/sqlfiles"
)

func TestStateDBRoundTrip(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, t.TempDir()+"/coord.sqlite", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if st, err := db.Load(ctx); err != nil || st != nil {
		t.Fatalf("empty: %v %v", st, err)
	}
	tr := &estimator.Trained{Model: estimator.Outcome, Weights: []map[string]*mat.Dense{{"b": mat.NewDense(1, 2, []float64{0.1, -1e-300})}},
		Shared: map[string][]float64{"a": {math.Pi}}, Lambda: mat.NewSymDense(1, []float64{1}), Rounds: 3, Loss: 2.5}
	st := &federation.State{RunID: "r", Sites: []string{"a"}, Step: 9, Trained: []*estimator.Trained{tr},
		Checkpoint: &estimator.Checkpoint{X: []float64{1.0 / 3}},
		Finish: &federation.FinishState{LocalATE: []float64{0.1}, AIPW: []inference.Sums{{N: 7, Sum: 0.7, SumSq: 1e-17}}, Clipped: []int{2},
			Done: []bool{true}}}
	if err := db.Save(ctx, st); err != nil {
		t.Fatal(err)
	}
	got, err := db.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Step != 9 || got.Checkpoint.X[0] != 1.0/3 || got.Trained[0].Weights[0]["b"].At(0, 1) != -1e-300 || got.Trained[0].Shared["a"][0] != math.Pi {
		t.Fatalf("round trip: %+v", got)
	}
	if f := got.Finish; f == nil || f.LocalATE[0] != 0.1 || f.AIPW[0].SumSq != 1e-17 || f.Clipped[0] != 2 || f.AIPW[0].N != 7 || !f.Done[0] {
		t.Fatalf("round trip of the finish phase: %+v", got.Finish)
	}
	if err := db.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := db.Load(ctx); st != nil {
		t.Fatal("state after Clear")
	}
}

func TestStateDBRunLog(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, t.TempDir()+"/coord.sqlite", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, e := range []federation.RunEnd{federation.EndOf("r1", federation.ErrSilent), federation.EndOf("r2", nil)} {
		if err := db.LogRun(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.RunLog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[{r1 failed site silent} {r2 completed }]" {
		t.Errorf("run log %v", got)
	}
}

// TestFinishedRunKeepsLambda: crff_coordinator_runs keeps each model's
// transfer factors, so that a report can show a finished run's matrix.
func TestFinishedRunKeepsLambda(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/coord.sqlite"
	db, err := Open(ctx, path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lam := mat.NewSymDense(2, []float64{1, 0.25, 0.25, 1})
	res := &federation.Result{RunID: "r1", Rows: []int{10, 20}, Sites: []string{"a", "b"},
		Models: map[estimator.Kind]*estimator.Trained{estimator.Outcome: {Model: estimator.Outcome, Lambda: lam}}}
	if err := db.Finish(ctx, res); err != nil {
		t.Fatal(err)
	}
	runs, err := ReadRuns(ctx, db.db)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || fmt.Sprint(runs[0].Lambda) != "map[outcome:[[1 0.25] [0.25 1]]]" {
		t.Errorf("runs %+v", runs)
	}
}

// legacySchema is crff_coordinator_runs as coordinators wrote it before
// their files had a schema version, in its three generations: before the
// AIPW estimate, before sites, before lambda; each older file got the
// newer columns by ALTER TABLE when opened.
var legacySchema = []string{
	`CREATE TABLE crff_coordinator_runs (run TEXT PRIMARY KEY, finished_at TEXT NOT NULL, global_ate REAL NOT NULL, global_se REAL, rows INTEGER NOT NULL)`,
	`CREATE TABLE crff_coordinator_runs (run TEXT PRIMARY KEY, finished_at TEXT NOT NULL, global_ate REAL NOT NULL, global_se REAL, rows INTEGER NOT NULL, global_lower REAL, global_upper REAL, plugin_ate REAL)`,
	`CREATE TABLE crff_coordinator_runs (run TEXT PRIMARY KEY, finished_at TEXT NOT NULL, global_ate REAL NOT NULL, global_se REAL, rows INTEGER NOT NULL, global_lower REAL, global_upper REAL, plugin_ate REAL, sites TEXT)`,
	`CREATE TABLE crff_coordinator_runs (run TEXT PRIMARY KEY, finished_at TEXT NOT NULL, global_ate REAL NOT NULL, global_se REAL, rows INTEGER NOT NULL, global_lower REAL, global_upper REAL, plugin_ate REAL, sites TEXT, lambda TEXT)`,
}

// TestOpenAdoptsUnversionedFile opens coordinator files written before
// they had a schema version: each is adopted at the version its columns
// show, migrated to the latest, and keeps its runs and state.
func TestOpenAdoptsUnversionedFile(t *testing.T) {
	ctx := context.Background()
	for gen, runs := range legacySchema {
		t.Run(fmt.Sprint(gen+1), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "coord.sqlite")
			raw, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{runs,
				`CREATE TABLE crff_coordinator_state (id INTEGER PRIMARY KEY CHECK (id = 1), run TEXT NOT NULL, step INTEGER NOT NULL, state BLOB NOT NULL, saved_at TEXT NOT NULL)`,
				`INSERT INTO crff_coordinator_runs (run, finished_at, global_ate, global_se, rows) VALUES ('old', '2026-01-01T00:00:00.000Z', 3.9, 0.001, 300)`,
			} {
				if _, err := raw.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			raw.Close()

			db, err := Open(ctx, path, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if v, err := sqlfiles.SchemaVersion(ctx, db.db); err != nil || v != latest(t) {
				t.Errorf("schema version %d (%v), want %d", v, err, latest(t))
			}
			if err := db.Finish(ctx, &federation.Result{RunID: "new", Rows: []int{1}, Sites: []string{"a"}}); err != nil {
				t.Fatal(err)
			}
			got, err := ReadRuns(ctx, db.db)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || got[0].Run != "new" || got[1].Run != "old" || got[1].PlugIn != 3.9 || got[1].Sites != nil {
				t.Errorf("runs %+v", got)
			}
			if log, err := db.RunLog(ctx); err != nil || len(log) != 1 {
				t.Errorf("run log %v (%v)", log, err)
			}
		})
	}
}

// TestOpenRefusesNewerSchema: a file a newer crffd migrated further is
// refused, not misread.
func TestOpenRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "coord.sqlite")
	db, err := Open(ctx, path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.db.ExecContext(ctx, `INSERT INTO crff_schema_version (version, name, applied_at) VALUES (?, 'future', '2027-01-01T00:00:00.000Z')`, latest(t)+1); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(ctx, path, time.Second); !errors.Is(err, ErrSchemaTooNew) {
		t.Errorf("open: %v, want ErrSchemaTooNew", err)
	}
	// Opening an up-to-date file again changes nothing.
	path = filepath.Join(t.TempDir(), "coord.sqlite")
	for range 2 {
		db, err := Open(ctx, path, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
}

// latest is the last coordinator migration's version.
func latest(t *testing.T) int {
	t.Helper()
	ms, err := sqlfiles.CoordinatorMigrations()
	if err != nil {
		t.Fatal(err)
	}
	return ms[len(ms)-1].Version
}
