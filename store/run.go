package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// RunState is the state of a run.
type RunState string

// Run states.
const (
	// RunTraining is a run whose model is being fitted: its model state may
	// be saved, but it has no results yet.
	RunTraining RunState = "training"
	// RunCurrent is the run whose results crff_cate, crff_ate,
	// crff_transfer and crff_rejected hold. At most one run is current.
	RunCurrent RunState = "current"
)

// Run is one training run at a site.
type Run struct {
	ID          string
	State       RunState
	Layout      Layout    // the columns the run's rows were read with
	StartedAt   time.Time // when BeginRun recorded it
	PublishedAt time.Time // when its results were written; zero while training
	// Setup is the JSON the daemon saved with SaveSetup: what it needs,
	// besides the model state, to score rows with the run's model. Nil
	// until saved.
	Setup json.RawMessage
}

// BeginRun records a new training run, with the layout its records were
// read with (Records.Layout), so that model state can be saved for it and
// rows added later are read the same way. Beginning a run changes nothing
// that users see: the current run's results stay in place until
// WriteResults publishes the new run's. Beginning a run that exists already
// is an error.
func (s *Site) BeginRun(ctx context.Context, run string, layout Layout) error {
	if run == "" {
		return fmt.Errorf("begin run in %q: empty run id", s.path)
	}
	if len(layout.Covariates) == 0 || len(layout.Binary) != len(layout.Covariates) {
		return fmt.Errorf("begin run %q in %q: %w: layout has %d covariates and %d covariate types",
			run, s.path, ErrBadResult, len(layout.Covariates), len(layout.Binary))
	}
	js, err := json.Marshal(layout)
	if err != nil {
		return fmt.Errorf("begin run %q in %q: %w", run, s.path, err)
	}
	return s.writeTx(ctx, "begin run in", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO crff_run (run, state, layout, started_at) VALUES (?, 'training', ?, ?)`,
			run, string(js), now())
		if err != nil {
			return fmt.Errorf("run %q: %w", run, err)
		}
		return nil
	})
}

// SaveSetup stores the setup of a run (see Run.Setup), replacing any saved
// before. setup must be valid JSON.
func (s *Site) SaveSetup(ctx context.Context, run string, setup []byte) error {
	if !json.Valid(setup) {
		return fmt.Errorf("save setup of run %q in %q: %w: not valid JSON", run, s.path, ErrBadResult)
	}
	return s.writeTx(ctx, "save setup in", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE crff_run SET setup = ? WHERE run = ?`, string(setup), run)
		if err != nil {
			return fmt.Errorf("run %q: %w", run, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("%w %q", ErrNoRun, run)
		}
		return nil
	})
}

// CurrentRun returns the run whose results are published, or an error
// wrapping ErrNoRun when there is none.
func (s *Site) CurrentRun(ctx context.Context) (Run, error) {
	var r Run
	err := s.readTx(ctx, "read current run from", func(tx *sql.Tx) error {
		var err error
		r, err = currentRun(ctx, tx)
		return err
	})
	return r, err
}

// LookupRun returns the run with the given id, or an error wrapping ErrNoRun.
func (s *Site) LookupRun(ctx context.Context, run string) (Run, error) {
	var r Run
	err := s.readTx(ctx, "read run from", func(tx *sql.Tx) error {
		var err error
		r, err = scanRun(tx.QueryRowContext(ctx, runColumns+` WHERE run = ?`, run))
		if errors.Is(err, ErrNoRun) {
			return fmt.Errorf("%w %q", ErrNoRun, run)
		}
		return err
	})
	return r, err
}

const runColumns = `SELECT run, state, layout, started_at, coalesce(published_at, ''), setup FROM crff_run`

func currentRun(ctx context.Context, q querier) (Run, error) {
	r, err := scanRun(q.QueryRowContext(ctx, runColumns+` WHERE state = 'current'`))
	if errors.Is(err, ErrNoRun) {
		return r, fmt.Errorf("%w: no run is current (no results written yet)", ErrNoRun)
	}
	return r, err
}

func scanRun(row *sql.Row) (Run, error) {
	var r Run
	var layout, started, published string
	var setup sql.NullString
	err := row.Scan(&r.ID, &r.State, &layout, &started, &published, &setup)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrNoRun
	}
	if err != nil {
		return r, err
	}
	if setup.Valid {
		r.Setup = json.RawMessage(setup.String)
	}
	if err := json.Unmarshal([]byte(layout), &r.Layout); err != nil {
		return r, fmt.Errorf("%w: layout of run %q: %w", ErrCorrupt, r.ID, err)
	}
	if len(r.Layout.Binary) != len(r.Layout.Covariates) {
		return r, fmt.Errorf("%w: layout of run %q has %d covariates and %d types", ErrCorrupt, r.ID,
			len(r.Layout.Covariates), len(r.Layout.Binary))
	}
	if r.StartedAt, err = parseTime(started); err != nil {
		return r, fmt.Errorf("%w: run %q: %w", ErrCorrupt, r.ID, err)
	}
	if published != "" {
		if r.PublishedAt, err = parseTime(published); err != nil {
			return r, fmt.Errorf("%w: run %q: %w", ErrCorrupt, r.ID, err)
		}
	}
	return r, nil
}

// runState returns the state of run within tx, or ErrNoRun.
func runState(ctx context.Context, q querier, run string) (RunState, error) {
	var st RunState
	err := q.QueryRowContext(ctx, `SELECT state FROM crff_run WHERE run = ?`, run).Scan(&st)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%w %q", ErrNoRun, run)
	}
	return st, err
}
