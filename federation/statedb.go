package federation

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"net/url"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	sqlfiles "github.com/crffd/crffd/sql"
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

// addRunColumns adds to crff_coordinator_runs of a file written before the
// AIPW estimate the columns it lacks. Its old rows keep NULL there, which
// is how a reader (the coordinator report) tells that their global_ate is
// the plug-in ATE and their global_se not a standard error.
func addRunColumns(ctx context.Context, db *sql.DB) error {
	have := map[string]bool{}
	rows, err := db.QueryContext(ctx, `SELECT name FROM pragma_table_info('crff_coordinator_runs')`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		have[name] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, col := range []string{"global_lower", "global_upper", "plugin_ate"} {
		if !have[col] {
			// col is one of the names above, never input.
			if _, err := db.ExecContext(ctx, `ALTER TABLE crff_coordinator_runs ADD COLUMN `+col+` REAL`); err != nil {
				return err
			}
		}
	}
	return nil
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

// Finish records a completed run.
func (s *StateDB) Finish(ctx context.Context, r *Result) error {
	total := 0
	for _, n := range r.Rows {
		total += n
	}
	_, err := s.db.ExecContext(ctx, sqlFinish, r.RunID, r.GlobalAIPW.Estimate, r.GlobalAIPW.SE,
		r.GlobalAIPW.Lower, r.GlobalAIPW.Upper, r.GlobalATE, total)
	return err
}
