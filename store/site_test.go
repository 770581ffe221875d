package store_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/sqlfiles"
	"github.com/crffd/crffd/store"
)

func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		path string
		want error
		msg  string
	}{
		{"csv file", write("records.csv", "id,age\n1,34\n2,51\n"), store.ErrNotSQLite, "does not start with the SQLite header"},
		{"short file", write("short.sqlite", "SQLi"), store.ErrNotSQLite, "not an SQLite database"},
		{"directory", dir, store.ErrNotSQLite, "not a regular file"},
		{"missing file", filepath.Join(dir, "typo.sqlite"), fs.ErrNotExist, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before string
			if fi, err := os.Stat(tt.path); err == nil && fi.Mode().IsRegular() {
				before = fileDigest(t, tt.path)
			}
			s, err := store.Open(context.Background(), tt.path, store.Options{})
			if !errors.Is(err, tt.want) {
				t.Fatalf("Open: err = %v, want %v", err, tt.want)
			}
			if s != nil {
				t.Error("Open returned a site with an error")
			}
			if !strings.HasPrefix(err.Error(), `open site "`+tt.path+`": `) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("message %q does not name the file or say %q", err, tt.msg)
			}
			if before != "" && fileDigest(t, tt.path) != before {
				t.Error("Open changed the file")
			}
			for _, suffix := range []string{"-wal", "-shm", "-journal"} {
				if _, err := os.Stat(tt.path + suffix); err == nil {
					t.Errorf("Open left %s%s behind", tt.path, suffix)
				}
			}
		})
	}
}

func TestOpenCreatesAndMigrates(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "new dir? #1.sqlite")
	s, err := store.Open(ctx, path, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.SchemaVersion(ctx)
	if err != nil || v != sqlfiles.Latest() {
		t.Fatalf("schema version %d, %v; want %d", v, err, sqlfiles.Latest())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("file not created at its exact path: %v", err)
	}
	var mode string
	if err := rawDB(t, path).QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal mode %q, %v; want wal", mode, err)
	}
	// Opening again applies nothing new.
	s = openSite(t, path)
	var n int
	if err := rawDB(t, path).QueryRow(`SELECT count(*) FROM crff_schema_version`).Scan(&n); err != nil || n != sqlfiles.Latest() {
		t.Errorf("%d migrations recorded (%v), want %d", n, err, sqlfiles.Latest())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadCATE(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("use after Close: err = %v, want ErrClosed", err)
	}
}

func TestOpenSchemaTooNew(t *testing.T) {
	path := newRecordsFile(t)
	s := openSite(t, path)
	s.Close()
	execSQL(t, path, `INSERT INTO crff_schema_version VALUES (999, 'future', '2030-01-01T00:00:00.000Z')`)
	_, err := store.Open(context.Background(), path, store.Options{})
	if !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("err = %v, want ErrSchemaTooNew", err)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "schema version 999") {
		t.Errorf("message %q does not name the file and the version", err)
	}
}

// holdLock starts a transaction on a plain connection to path and keeps it
// open until the test ends.
func holdLock(t *testing.T, path, begin string) {
	t.Helper()
	db := rawDB(t, path)
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), begin); err != nil {
		t.Fatal(err)
	}
	if begin == "BEGIN" {
		// A deferred transaction takes its lock at the first write.
		if _, err := conn.ExecContext(context.Background(), `UPDATE records SET age = age WHERE 0`); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		conn.ExecContext(context.Background(), "ROLLBACK")
		conn.Close()
	})
}

func TestOpenLocked(t *testing.T) {
	tests := []struct {
		name  string
		wal   bool
		begin string
	}{
		{"rollback journal, exclusive lock", false, "BEGIN EXCLUSIVE"},
		{"WAL, write lock, migrations pending", true, "BEGIN IMMEDIATE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := newRecordsFile(t)
			if tt.wal {
				execSQL(t, path, `PRAGMA journal_mode = WAL`)
			}
			before := tableDigest(t, path, "records")
			holdLock(t, path, tt.begin)
			const timeout = 300 * time.Millisecond
			_, err := store.Open(context.Background(), path, store.Options{BusyTimeout: timeout})
			if !errors.Is(err, store.ErrLocked) {
				t.Fatalf("err = %v, want ErrLocked", err)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "locked") || !strings.Contains(err.Error(), "300ms") {
				t.Errorf("message %q does not name the file, the lock and the timeout", err)
			}
			if tt.wal {
				if after := tableDigest(t, path, "records"); after != before {
					t.Error("user table changed")
				}
			}
		})
	}
}

// TestWriteLocked checks that a write waits out the busy timeout and then
// fails clearly, while reads go on in WAL mode.
func TestWriteLocked(t *testing.T) {
	ctx := context.Background()
	path := newRecordsFile(t)
	s, err := store.Open(ctx, path, store.Options{BusyTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs, err := s.ReadRecords(ctx, recordsSource(path))
	if err != nil {
		t.Fatal(err)
	}
	holdLock(t, path, "BEGIN")
	if err := s.BeginRun(ctx, "r1", recs.Layout); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("BeginRun under another writer's lock: err = %v, want ErrLocked", err)
	}
	if _, err := s.ReadRecords(ctx, recordsSource(path)); err != nil {
		t.Errorf("ReadRecords while another connection writes: %v", err)
	}
}

func TestSourceValidate(t *testing.T) {
	valid := store.Source{DB: "a.sqlite", Table: "t", IDColumn: "id", TreatmentColumn: "w", OutcomeColumn: "y"}
	tests := []struct {
		name   string
		change func(*store.Source)
		msg    string // "" for valid
	}{
		{"valid", func(*store.Source) {}, ""},
		{"valid full", func(s *store.Source) {
			s.Covariates, s.Binary, s.Continuous = []string{"a", "b", "c"}, []string{"a"}, []string{"B"}
			s.OutcomeType, s.OnInvalid, s.IdentityColumns = store.OutcomeBinary, store.Skip, []string{"name", "id"}
		}, ""},
		{"no db", func(s *store.Source) { s.DB = "" }, "db: required"},
		{"no table", func(s *store.Source) { s.Table = " " }, "table: required"},
		{"no id", func(s *store.Source) { s.IDColumn = "" }, "id_column: required"},
		{"no treatment", func(s *store.Source) { s.TreatmentColumn = "" }, "treatment_column: required"},
		{"no outcome", func(s *store.Source) { s.OutcomeColumn = "" }, "outcome_column: required"},
		{"crff table", func(s *store.Source) { s.Table = "CRFF_cate" }, `table: "CRFF_cate" is one of crffd's own objects`},
		{"NUL", func(s *store.Source) { s.Table = "a\x00" }, "contains a NUL byte"},
		{"outcome type", func(s *store.Source) { s.OutcomeType = "count" }, `outcome_type: "count": must be continuous, binary or auto`},
		{"on_invalid", func(s *store.Source) { s.OnInvalid = "drop" }, `on_invalid: "drop": must be refuse or skip`},
		{"same column twice", func(s *store.Source) { s.OutcomeColumn = "W" }, `outcome_column: column "W" is already the treatment_column`},
		{"covariate is outcome", func(s *store.Source) { s.Covariates = []string{"a", "y"} }, `covariates: column "y" is the outcome_column`},
		{"covariate twice", func(s *store.Source) { s.Covariates = []string{"a", "A"} }, `covariates: column "A" is listed twice`},
		{"binary and continuous", func(s *store.Source) { s.Binary, s.Continuous = []string{"a"}, []string{"a"} }, `continuous: column "a" is also listed as binary`},
		{"binary not a covariate", func(s *store.Source) { s.Covariates, s.Binary = []string{"a"}, []string{"b"} }, `binary: column "b" is not in covariates`},
		{"binary treatment", func(s *store.Source) { s.Binary = []string{"w"} }, `binary: column "w" is the treatment_column, not a covariate`},
		{"identity twice", func(s *store.Source) { s.IdentityColumns = []string{"n", "n"} }, `identity_columns: column "n" is listed twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := valid
			tt.change(&s)
			err := s.Validate()
			if tt.msg == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ce *store.ConfigError
			if !errors.Is(err, store.ErrConfig) || !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Validate: err = %v, want a ConfigError containing %q", err, tt.msg)
			}
		})
	}
}

// TestOpenReadOnly: a read-only open writes nothing, refuses a file
// without crffd's tables, and refuses writes to a site file.
func TestOpenReadOnly(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "plain.sqlite")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE patients (id INTEGER PRIMARY KEY, w INTEGER, y REAL)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before, _ := os.ReadFile(path)
	if _, err := store.Open(ctx, path, store.Options{ReadOnly: true}); !errors.Is(err, store.ErrNotSite) ||
		!strings.Contains(err.Error(), "it has no crff_ tables; run crffd fit or crffd site on it first") {
		t.Errorf("read-only open of a file without crff_ tables: %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("a read-only open changed the file")
	}
	if _, err := os.Stat(path + "-wal"); err == nil {
		t.Error("a read-only open left a WAL file")
	}

	// A site file: readable, not writable.
	site, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	site.Close()
	ro, err := store.Open(ctx, path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.CurrentRun(ctx); !errors.Is(err, store.ErrNoRun) {
		t.Errorf("reading a read-only site: %v, want ErrNoRun", err)
	}
	if err := ro.AppendLoss(ctx, "r1", store.Loss{Model: "outcome", Round: 1, Loss: 1}); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("writing a read-only site: %v, want ErrReadOnly", err)
	}
}
