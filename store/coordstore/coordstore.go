// Package coordstore is a coordinator's own SQLite file: the checkpoints
// of the run in progress (a federation.Checkpointer) and the record of the
// runs it finished or gave up. Its schema is the numbered migrations of
// sqlfiles.CoordinatorMigrations, applied on open by the same code as a
// site file's (sqlfiles.Apply); a file written before it had a schema
// version is adopted as the version its columns show.
package coordstore

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

	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/sqlfiles"
)

var (
	//go:embed queries/save.sql
	sqlSave string
	//go:embed queries/load.sql
	sqlLoad string
	//go:embed queries/clear.sql
	sqlClear string
	//go:embed queries/finish.sql
	sqlFinish string
	//go:embed queries/runlog.sql
	sqlRunLog string
)

// DB is the coordinator's own SQLite file: a federation.Checkpointer, and
// the list of finished runs. It uses WAL mode, and every save is one
// transaction, so a coordinator killed at any moment leaves the last
// complete checkpoint.
type DB struct {
	db *sql.DB
}

// Open opens (creating when needed) the coordinator's SQLite file at path
// and brings its schema up to date; busy is how long a statement waits for
// another connection's lock.
func Open(ctx context.Context, path string, busy time.Duration) (*DB, error) {
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
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("coordinator state %q: %w", path, err)
	}
	return &DB{db: db}, nil
}

// newRunColumns are the columns of crff_coordinator_runs that files
// written before them lack, each with the migration that adds it: ReadRuns
// reads NULL in their place, and a file without a schema version is
// adopted as the last migration whose columns it has.
var newRunColumns = []struct {
	name    string
	version int
}{
	{"global_lower", 2}, {"global_upper", 2}, {"plugin_ate", 2},
	{"sites", 3},
	{"lambda", 4},
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

// ErrSchemaTooNew means that the file was written by a newer crffd, whose
// schema this one does not know.
var ErrSchemaTooNew = errors.New("coordinator state written by a newer crffd")

// migrate brings db's schema to the last of sqlfiles.CoordinatorMigrations
// in one IMMEDIATE transaction (the DSN's _txlock), and refuses a file
// whose schema is newer.
func migrate(ctx context.Context, db *sql.DB) error {
	ms, err := sqlfiles.CoordinatorMigrations()
	if err != nil {
		return err
	}
	latest := ms[len(ms)-1].Version
	have, err := sqlfiles.SchemaVersion(ctx, db)
	if err != nil {
		return err
	}
	if have == latest {
		return nil // only read, so that opening waits for no write lock
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // after Commit, a no-op
	// Read again under the write lock: another process may have migrated
	// the file meanwhile.
	if have, err = sqlfiles.SchemaVersion(ctx, tx); err != nil {
		return err
	}
	if have > latest {
		return fmt.Errorf("%w: the file has schema version %d, this crffd knows up to %d; use a newer crffd", ErrSchemaTooNew, have, latest)
	}
	now := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	if have == 0 {
		if have, err = adopt(ctx, tx, ms, now); err != nil {
			return err
		}
	}
	if err := sqlfiles.Apply(ctx, tx, ms, have, now); err != nil {
		return err
	}
	return tx.Commit()
}

// adopt gives a file without a schema version the version it has: none
// for a new file; for one written before coordinator files had a version,
// 0001_init (which creates only what such a file lacks) and then every
// later migration whose columns it already has, recorded as applied.
func adopt(ctx context.Context, tx *sql.Tx, ms []sqlfiles.Migration, now string) (int, error) {
	var n int
	if err := tx.QueryRowContext(ctx,
		`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'crff_coordinator_runs'`).Scan(&n); err != nil || n == 0 {
		return 0, err
	}
	if err := sqlfiles.Apply(ctx, tx, ms[:1], 0, now); err != nil {
		return 0, err
	}
	missing, err := missingRunColumns(ctx, tx)
	if err != nil {
		return 0, err
	}
	have := 1
	for _, c := range newRunColumns {
		if missing[c.name] {
			break
		}
		have = c.version
	}
	// A file got its columns in the order of newRunColumns, so a prefix of
	// them; the migration of a column it lacks adds its group whole.
	for _, c := range newRunColumns {
		if c.version <= have && missing[c.name] {
			return 0, fmt.Errorf("crff_coordinator_runs has some columns of migration %d and lacks %s", c.version, c.name)
		}
	}
	for _, m := range ms[1:have] {
		if err := sqlfiles.Record(ctx, tx, m, now); err != nil {
			return 0, err
		}
	}
	return have, nil
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
func (s *DB) Close() error { return s.db.Close() }

// Save implements federation.Checkpointer.
func (s *DB) Save(ctx context.Context, st *federation.State) error {
	b, err := federation.EncodeState(st)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, sqlSave, st.RunID, int64(st.Step), b)
	return err
}

// Load implements federation.Checkpointer.
func (s *DB) Load(ctx context.Context) (*federation.State, error) {
	var b []byte
	err := s.db.QueryRowContext(ctx, sqlLoad).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return federation.DecodeState(b)
}

// Clear implements federation.Checkpointer.
func (s *DB) Clear(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, sqlClear)
	return err
}

// Finish records a completed run, in crff_coordinator_runs and in the run
// log.
func (s *DB) Finish(ctx context.Context, r *federation.Result) error {
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
	return s.LogRun(ctx, federation.RunEnd{Run: r.RunID, Status: federation.RunCompleted})
}

// LogRun records how a run ended in crff_coordinator_run_log, replacing
// what was recorded for it before.
func (s *DB) LogRun(ctx context.Context, e federation.RunEnd) error {
	reason := sql.NullString{String: e.Reason, Valid: e.Reason != ""}
	_, err := s.db.ExecContext(ctx, sqlRunLog, e.Run, string(e.Status), reason)
	return err
}

// RunLog returns crff_coordinator_run_log in the order the runs ended.
func (s *DB) RunLog(ctx context.Context) ([]federation.RunEnd, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT run, status, coalesce(reason, '') FROM crff_coordinator_run_log ORDER BY ended_at, rowid`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []federation.RunEnd
	for rows.Next() {
		var e federation.RunEnd
		if err := rows.Scan(&e.Run, &e.Status, &e.Reason); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
