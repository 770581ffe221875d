package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/crffd/crffd/sqlfiles"
)

// DefaultBusyTimeout is how long a statement waits for another connection's
// lock before it fails with ErrLocked, when Options.BusyTimeout is zero.
const DefaultBusyTimeout = 5 * time.Second

// Options configure Open. The zero value is ready to use.
type Options struct {
	// BusyTimeout is how long to wait for a lock held by another connection
	// (another process, or the sqlite3 shell) before failing with
	// ErrLocked. Zero means DefaultBusyTimeout.
	BusyTimeout time.Duration `mapstructure:"busy_timeout" yaml:"busy_timeout,omitempty"`
	// MinArmRows is the smallest count of rows in each arm for which a
	// subgroup's figures are published in crff_gate (the site's
	// federation.min_arm_rows); zero means DefaultMinArmRows.
	MinArmRows int `mapstructure:"-" yaml:"-"`
	// Create makes Open create the file when it does not exist. Without it
	// a missing file is an error (fs.ErrNotExist), so that a typo in a path
	// never starts an empty site.
	Create bool `mapstructure:"-" yaml:"-"`
	// ReadOnly opens the file for reading alone: nothing is written to it,
	// not the switch to WAL mode, not a migration, not a table. The file
	// must already hold crffd's tables at this crffd's schema version
	// (ErrNotSite otherwise), and every write fails with ErrReadOnly.
	// Read-only commands such as crffd report use it.
	ReadOnly bool `mapstructure:"-" yaml:"-"`
	// Logger receives the store's structured log (migrations, runs
	// published, views recreated), never a record's values. Nil discards it.
	Logger *slog.Logger `mapstructure:"-" yaml:"-"`
	// MapRows makes ReadRecords keep the covariates of a large read (at
	// least MapRowsMin bytes) in a shared mapping of an unnamed temporary
	// file beside the site file (package mapped) instead of the Go heap,
	// where the system allows it, and the heap where it does not. The
	// mapping lasts as long as the process: one-shot commands such as
	// crffd fit set it, daemons do not.
	MapRows bool `mapstructure:"-" yaml:"-"`
}

// MapRowsMin is the size of the covariates from which Options.MapRows maps
// them: smaller reads stay in the heap.
const MapRowsMin = 16 << 20

// Site is an open site file. Its methods are safe for concurrent use. Writes
// go through one connection, in IMMEDIATE transactions; reads use a separate
// pool of read-only connections, so reading never blocks on crffd's own
// writes (the file is in WAL mode).
type Site struct {
	path    string
	timeout time.Duration
	log     *slog.Logger
	minArm  int     // Options.MinArmRows, or its default
	mapRows int     // the least covariate values a read maps (Options.MapRows); 0: none
	rw      *sql.DB // one connection, BEGIN IMMEDIATE
	ro      *sql.DB // query_only connections
	closed  atomic.Bool
}

// sqliteHeader starts every SQLite database file.
var sqliteHeader = []byte("SQLite format 3\x00")

// Open opens the site file at path: it checks that the file is an SQLite
// database, switches it to WAL mode, enables foreign keys and the busy
// timeout, and applies the crff_ schema migrations the file lacks. It
// refuses a file whose crff_ schema is newer than this binary
// (ErrSchemaTooNew). Open never changes the user's tables.
//
// Errors name the file and wrap ErrNotSQLite, ErrLocked, ErrSchemaTooNew or
// fs.ErrNotExist where they apply.
func Open(ctx context.Context, path string, opts Options) (*Site, error) {
	if path == "" {
		return nil, errors.New("open site: empty path")
	}
	s := &Site{path: path, timeout: opts.BusyTimeout, log: opts.Logger, minArm: opts.MinArmRows}
	if opts.MapRows {
		s.mapRows = MapRowsMin / 8
	}
	if s.minArm <= 0 {
		s.minArm = DefaultMinArmRows
	}
	if s.timeout <= 0 {
		s.timeout = DefaultBusyTimeout
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := checkFile(path, opts.Create); err != nil {
		return nil, fmt.Errorf("open site %q: %w", path, err)
	}
	open := s.open
	if opts.ReadOnly {
		open = func(ctx context.Context, _ bool) error { return s.openReadOnly(ctx) }
	}
	if err := open(ctx, opts.Create); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// openReadOnly opens the read pool alone, with mode=ro, and checks that
// the file holds this crffd's schema.
func (s *Site) openReadOnly(ctx context.Context) error {
	dsn := strings.Replace(s.dsn(false, true), "mode=rw", "mode=ro", 1)
	var err error
	if s.ro, err = sql.Open("sqlite", dsn); err != nil {
		return s.wrap("open site", err)
	}
	ms, err := sqlfiles.Migrations()
	if err != nil {
		return fmt.Errorf("open site %q: %w", s.path, err)
	}
	have, err := schemaVersion(ctx, s.ro)
	if err != nil {
		return s.wrap("open site", err)
	}
	switch latest := ms[len(ms)-1].Version; {
	case have == 0:
		return fmt.Errorf("open site %q read-only: %w: it has no crff_ tables; run crffd fit or crffd site on it first", s.path, ErrNotSite)
	case have > latest:
		return fmt.Errorf("open site %q: %w: the file has schema version %d, this crffd knows up to %d; use a newer crffd", s.path, ErrSchemaTooNew, have, latest)
	case have < latest:
		return fmt.Errorf("open site %q read-only: %w: its crff_ schema is version %d, this crffd's is %d; run crffd fit or crffd site on it to upgrade it", s.path, ErrNotSite, have, latest)
	}
	return nil
}

// checkFile refuses a path that is missing (unless create), not a regular
// file, or not an SQLite database. An empty file is an empty database, as
// SQLite has it.
func checkFile(path string, create bool) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) && create {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: not a regular file", ErrNotSQLite)
	}
	if fi.Size() == 0 {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, len(sqliteHeader))
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, sqliteHeader) {
		return fmt.Errorf("%w: the file does not start with the SQLite header", ErrNotSQLite)
	}
	return nil
}

// dsn returns the modernc.org/sqlite data source name for path. The path is
// given as a file: URI so that no character of it is taken for a parameter.
func (s *Site) dsn(create, readOnly bool) string {
	mode := "rw"
	if create {
		mode = "rwc"
	}
	q := url.Values{}
	q.Set("mode", mode)
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", s.timeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
	}
	return sqlfiles.FileURI(s.path, q)
}

func (s *Site) open(ctx context.Context, create bool) error {
	var err error
	if s.rw, err = sql.Open("sqlite", s.dsn(create, false)); err != nil {
		return s.wrap("open site", err)
	}
	s.rw.SetMaxOpenConns(1)
	s.rw.SetMaxIdleConns(1)
	s.rw.SetConnMaxIdleTime(0)
	s.rw.SetConnMaxLifetime(0)
	var mode string
	if err := s.rw.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return s.wrap("open site", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("open site %q: cannot switch to WAL mode (journal mode is %q)", s.path, mode)
	}
	if err := s.migrate(ctx); err != nil {
		return err
	}
	if s.ro, err = sql.Open("sqlite", s.dsn(false, true)); err != nil {
		return s.wrap("open site", err)
	}
	if err := s.ro.PingContext(ctx); err != nil {
		return s.wrap("open site", err)
	}
	return nil
}

// Path returns the site file's path as given to Open.
func (s *Site) Path() string { return s.path }

// Close closes the site's connections. It is safe to call more than once.
func (s *Site) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	var errs []error
	for _, db := range []*sql.DB{s.ro, s.rw} {
		if db != nil {
			errs = append(errs, db.Close())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close site %q: %w", s.path, err)
	}
	return nil
}

// usable returns ErrClosed, wrapped, after Close.
func (s *Site) usable(op string) error {
	if s.closed.Load() {
		return fmt.Errorf("%s %q: %w", op, s.path, ErrClosed)
	}
	return nil
}

// wrap names the operation and the file in err, and adds the sentinel that
// an SQLite error code stands for: ErrLocked for a busy or locked database,
// ErrNotSQLite for a file that is not a database.
func (s *Site) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		return err // names the file already
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return fmt.Errorf("%s %q: %w for longer than the busy timeout (%v): %w", op, s.path, ErrLocked, s.timeout, err)
		case sqlite3.SQLITE_NOTADB:
			return fmt.Errorf("%s %q: %w: %w", op, s.path, ErrNotSQLite, err)
		}
	}
	return fmt.Errorf("%s %q: %w", op, s.path, err)
}

// writeTx runs fn in one IMMEDIATE transaction on the write connection and
// commits it, or rolls it back when fn fails. Errors are wrapped by s.wrap.
func (s *Site) writeTx(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	if err := s.usable(op); err != nil {
		return err
	}
	if s.rw == nil {
		return fmt.Errorf("%s %q: %w", op, s.path, ErrReadOnly)
	}
	tx, err := s.rw.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap(op, err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return s.wrap(op, err)
	}
	if err := tx.Commit(); err != nil {
		return s.wrap(op, err)
	}
	return nil
}

// readTx runs fn in one read transaction on a read-only connection, so that
// every query in fn sees the same snapshot of the file.
func (s *Site) readTx(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	if err := s.usable(op); err != nil {
		return err
	}
	tx, err := s.ro.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap(op, err)
	}
	defer func() { _ = tx.Rollback() }() // read-only: nothing to keep
	if err := fn(tx); err != nil {
		return s.wrap(op, err)
	}
	return nil
}

// DataVersion returns SQLite's data_version as seen by the write
// connection. It changes when another connection, in this process or
// another, commits to the file, and not when this Site writes. A daemon
// that polls the file compares it between polls and skips the poll when
// nobody else wrote. It fails with ErrReadOnly on a Site opened read-only.
func (s *Site) DataVersion(ctx context.Context) (int64, error) {
	const op = "read the data version of"
	if err := s.usable(op); err != nil {
		return 0, err
	}
	if s.rw == nil {
		return 0, fmt.Errorf("%s %q: %w", op, s.path, ErrReadOnly)
	}
	var v int64
	if err := s.rw.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
		return 0, s.wrap(op, err)
	}
	return v, nil
}

// now is the time stamp format of every crff_ table: RFC 3339, UTC,
// milliseconds.
func now() string { return formatTime(time.Now()) }

const timeFormat = "2006-01-02T15:04:05.000Z"

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

func parseTime(s string) (time.Time, error) { return time.Parse(timeFormat, s) }
