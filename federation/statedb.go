package federation

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/sqlfiles"
)

var (
	//go:embed sql/coordinator.sql
	sqlSchema string
	//go:embed sql/save.sql
	sqlSave string
	//go:embed sql/load.sql
	sqlLoad string
	//go:embed sql/clear.sql
	sqlClear string
	//go:embed sql/finish.sql
	sqlFinish string
	//go:embed sql/runlog.sql
	sqlRunLog string
)

// StateDB is the coordinator's own SQLite file: a Checkpointer, and the list
// of finished runs. It uses WAL mode, and every save is one transaction, so a
// coordinator killed at any moment leaves the last complete checkpoint.
type StateDB struct {
	db *sql.DB
}

// OpenStateDB opens (creating when needed) the coordinator's SQLite file.
func OpenStateDB(ctx context.Context, path string, busy time.Duration) (*StateDB, error) {
	q := url.Values{}
	q.Set("mode", "rwc")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", sqlfiles.FileURI(path, q))
	if err != nil {
		return nil, fmt.Errorf("coordinator state %q: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, sqlSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("coordinator state %q: %w", path, err)
	}
	if err := addRunColumns(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("coordinator state %q: %w", path, err)
	}
	return &StateDB{db: db}, nil
}

// newRunColumns are the columns of crff_coordinator_runs, with their
// types, that files written before them lack: the AIPW columns, then
// sites.
var newRunColumns = []struct{ name, typ string }{
	{"global_lower", "REAL"}, {"global_upper", "REAL"}, {"plugin_ate", "REAL"},
	// The sites a run covered, as a JSON array; NULL in runs recorded
	// before coordinator.min_sites, which covered every configured site.
	{"sites", "TEXT"},
	// The learned transfer factors of each model, as a JSON object of
	// model name to matrix (row s: how much site s borrowed from each
	// site); NULL in runs recorded before it was kept.
	{"lambda", "TEXT"},
}

// missingRunColumns returns the names of the newRunColumns that q's
// crff_coordinator_runs lacks.
func missingRunColumns(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}) (map[string]bool, error) {
	have := map[string]bool{}
	rows, err := q.QueryContext(ctx, `SELECT name FROM pragma_table_info('crff_coordinator_runs')`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		have[name] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	missing := map[string]bool{}
	for _, c := range newRunColumns {
		if !have[c.name] {
			missing[c.name] = true
		}
	}
	return missing, nil
}

// addRunColumns adds to crff_coordinator_runs of an older file the columns
// it lacks. Its old rows keep NULL there, which is how ReadRuns tells that
// their global_ate is the plug-in ATE and their global_se not a standard
// error, or that they covered every site.
func addRunColumns(ctx context.Context, db *sql.DB) error {
	missing, err := missingRunColumns(ctx, db)
	if err != nil {
		return err
	}
	for _, c := range newRunColumns {
		if missing[c.name] {
			// c is one of newRunColumns, never input.
			if _, err := db.ExecContext(ctx, `ALTER TABLE crff_coordinator_runs ADD COLUMN `+c.name+` `+c.typ); err != nil {
				return err
			}
		}
	}
	return nil
}

// FinishedRun is one row of crff_coordinator_runs: a run the coordinator
// completed.
type FinishedRun struct {
	Run, Finished string
	// AIPW is the global AIPW estimate with its standard error and
	// interval. For a run recorded before the AIPW estimate it is NaN
	// throughout, and PlugIn holds what such a run recorded.
	AIPW   inference.Estimate
	PlugIn float64 // the global plug-in ATE
	Rows   int
	// Sites are the sites the run covered; nil for a run recorded before
	// they were, which covered every configured site.
	Sites []string
	// Lambda is, per model name, the learned matrix of transfer factors
	// Λ (row s: the factors site s applied to each site, in Sites order);
	// nil for a run recorded before it was kept.
	Lambda map[string][][]float64
}

// ReadRuns returns the finished runs recorded in a coordinator's state
// file open as db (read-only is enough), newest first; a file written
// before the AIPW estimate reads too.
func ReadRuns(ctx context.Context, db *sql.DB) ([]FinishedRun, error) {
	missing, err := missingRunColumns(ctx, db)
	if err != nil {
		return nil, err
	}
	aipw, sites := "global_lower, global_upper, plugin_ate", "sites"
	if missing["plugin_ate"] {
		aipw = "NULL, NULL, NULL"
	}
	if missing["sites"] {
		sites = "NULL"
	}
	lambda := "lambda"
	if missing["lambda"] {
		lambda = "NULL"
	}
	q := `SELECT run, finished_at, global_ate, global_se, ` + aipw + `, rows, ` + sites + `, ` + lambda + ` FROM crff_coordinator_runs ORDER BY finished_at DESC`
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []FinishedRun
	for rows.Next() {
		var r FinishedRun
		var ate float64
		var se, lower, upper, plugin sql.NullFloat64
		var sites, lambda sql.NullString
		if err := rows.Scan(&r.Run, &r.Finished, &ate, &se, &lower, &upper, &plugin, &r.Rows, &sites, &lambda); err != nil {
			return nil, err
		}
		if lambda.Valid {
			if err := json.Unmarshal([]byte(lambda.String), &r.Lambda); err != nil {
				return nil, fmt.Errorf("crff_coordinator_runs.lambda of run %s: %w", r.Run, err)
			}
		}
		if sites.Valid {
			if err := json.Unmarshal([]byte(sites.String), &r.Sites); err != nil {
				return nil, fmt.Errorf("crff_coordinator_runs.sites of run %s: %w", r.Run, err)
			}
		}
		if !plugin.Valid {
			// Recorded before the AIPW estimate: global_ate was the
			// plug-in ATE and global_se not a standard error.
			r.AIPW, r.PlugIn = inference.PointEstimate(math.NaN(), r.Rows), ate
		} else {
			r.AIPW = inference.Estimate{Estimate: ate, SE: orNaN(se), Lower: orNaN(lower), Upper: orNaN(upper), N: r.Rows}
			r.PlugIn = plugin.Float64
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// orNaN returns v's value, or NaN for NULL.
func orNaN(v sql.NullFloat64) float64 {
	if !v.Valid {
		return math.NaN()
	}
	return v.Float64
}

// Close closes the file.
func (s *StateDB) Close() error { return s.db.Close() }

// Save implements Checkpointer.
func (s *StateDB) Save(ctx context.Context, st *State) error {
	b, err := EncodeState(st)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, sqlSave, st.RunID, int64(st.Step), b)
	return err
}

// Load implements Checkpointer.
func (s *StateDB) Load(ctx context.Context) (*State, error) {
	var b []byte
	err := s.db.QueryRowContext(ctx, sqlLoad).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return DecodeState(b)
}

// Clear implements Checkpointer.
func (s *StateDB) Clear(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, sqlClear)
	return err
}

// Finish records a completed run, in crff_coordinator_runs and in the run
// log.
func (s *StateDB) Finish(ctx context.Context, r *Result) error {
	total := 0
	for _, n := range r.Rows {
		total += n
	}
	sites, err := json.Marshal(r.Sites)
	if err != nil {
		return err
	}
	lambda := map[string][][]float64{}
	for k, t := range r.Models {
		if m := t.LambdaRows(); m != nil {
			lambda[k.String()] = m
		}
	}
	lj, err := json.Marshal(lambda)
	if err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, sqlFinish, r.RunID, r.GlobalAIPW.Estimate, r.GlobalAIPW.SE,
		r.GlobalAIPW.Lower, r.GlobalAIPW.Upper, r.GlobalATE, total, string(sites), string(lj)); err != nil {
		return err
	}
	return s.LogRun(ctx, RunEnd{Run: r.RunID, Status: RunCompleted})
}

// RunStatus is how a run ended.
type RunStatus string

// Run statuses, as crff_coordinator_run_log records them.
const (
	RunCompleted RunStatus = "completed"
	RunRefused   RunStatus = "refused" // a site refused the run, or the coordinator a site
	RunFailed    RunStatus = "failed"  // any other reason
)

// RunEnd is how one run ended, and why when it did not complete.
type RunEnd struct {
	Run    string
	Status RunStatus
	Reason string
}

// EndOf returns how the run ended with err (nil: completed): refused when
// err says a site refused the run (ErrSiteRefused) or the coordinator
// refused a site (ErrSchema, ErrFrequencies), failed otherwise.
func EndOf(run string, err error) RunEnd {
	switch {
	case err == nil:
		return RunEnd{Run: run, Status: RunCompleted}
	case errors.Is(err, ErrSiteRefused), errors.Is(err, ErrSchema), errors.Is(err, ErrFrequencies),
		errors.Is(err, ErrTooFewRows), errors.Is(err, ErrRowsChanged), errors.Is(err, ErrTooFewChanged):
		return RunEnd{Run: run, Status: RunRefused, Reason: err.Error()}
	}
	return RunEnd{Run: run, Status: RunFailed, Reason: err.Error()}
}

// LogRun records how a run ended in crff_coordinator_run_log, replacing
// what was recorded for it before.
func (s *StateDB) LogRun(ctx context.Context, e RunEnd) error {
	reason := sql.NullString{String: e.Reason, Valid: e.Reason != ""}
	_, err := s.db.ExecContext(ctx, sqlRunLog, e.Run, string(e.Status), reason)
	return err
}

// RunLog returns crff_coordinator_run_log in the order the runs ended.
func (s *StateDB) RunLog(ctx context.Context) ([]RunEnd, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT run, status, coalesce(reason, '') FROM crff_coordinator_run_log ORDER BY ended_at, rowid`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []RunEnd
	for rows.Next() {
		var e RunEnd
		if err := rows.Scan(&e.Run, &e.Status, &e.Reason); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
