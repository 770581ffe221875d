package sqlfiles

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
)

//go:embed migrations/*.sql coordinator/*.sql views/*.sql
var files embed.FS

// Migration is one numbered schema change.
type Migration struct {
	Version int    // from the file name: 1 for 0001_init.sql
	Name    string // from the file name: "init" for 0001_init.sql
	SQL     string // the statements, applied in one transaction
}

// ErrBadMigration means that the embedded migration files are misnamed or
// misnumbered. It is a build defect, caught by this package's tests.
var ErrBadMigration = errors.New("bad migration file")

var migrationName = regexp.MustCompile(`^([0-9]{4})_([a-z0-9_]+)\.sql$`)

// Migrations returns the embedded migrations in the order they apply,
// numbered 1, 2, … without gaps.
func Migrations() ([]Migration, error) {
	return parseMigrations(files, "migrations")
}

// CoordinatorMigrations returns the embedded migrations of a coordinator's
// own SQLite file (its state store), in the order they apply, numbered 1,
// 2, … without gaps. They are a sequence of their own: a coordinator's file
// is not a site's.
func CoordinatorMigrations() ([]Migration, error) {
	return parseMigrations(files, "coordinator")
}

// parseMigrations reads dir of fsys as migration files.
func parseMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []Migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() {
			return nil, fmt.Errorf("%w: %q is not named NNNN_name.sql", ErrBadMigration, e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		body, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %q: %w", e.Name(), err)
		}
		ms = append(ms, Migration{Version: v, Name: m[2], SQL: string(body)})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("%w: expected version %d, found %04d_%s.sql", ErrBadMigration, i+1, m.Version, m.Name)
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("%w: no migrations", ErrBadMigration)
	}
	return ms, nil
}

// Latest returns the schema version this binary brings: the number of the
// last migration.
func Latest() int {
	ms, err := Migrations()
	if err != nil {
		return 0
	}
	return ms[len(ms)-1].Version
}

// QuoteIdent returns name as an SQL identifier in double quotes, with any
// double quote inside doubled, so that any name (spaces, keywords, quotes)
// reaches SQLite intact. It reports an error for a name that SQLite cannot
// hold: the empty name and a name containing a NUL byte.
func QuoteIdent(name string) (string, error) {
	if name == "" {
		return "", errors.New("empty identifier")
	}
	if strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("identifier %q contains a NUL byte", name)
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`, nil
}

// QuoteString returns s as an SQL string literal in single quotes, with
// any single quote inside doubled, which SQLite reads back as s exactly
// (it has no other escapes). It reports an error for a string with a NUL
// byte, which a literal cannot hold.
func QuoteString(s string) (string, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return "", fmt.Errorf("string %q contains a NUL byte", s)
	}
	return quoteString(s), nil
}

var cateRecords = template.Must(template.ParseFS(files, "views/cate_records.sql"))

// CateRecordsView returns the CREATE VIEW statement of crff_cate_records for
// a site whose records are in table (a table or view) with ids in column id.
// The text is exactly what SQLite keeps in sqlite_schema.sql once the view
// is created, so that a caller can tell whether an existing view is current.
func CateRecordsView(table, id string) (string, error) {
	qt, err := QuoteIdent(table)
	if err != nil {
		return "", fmt.Errorf("table name: %w", err)
	}
	qi, err := QuoteIdent(id)
	if err != nil {
		return "", fmt.Errorf("id column name: %w", err)
	}
	var b strings.Builder
	if err := cateRecords.Execute(&b, struct{ Table, ID string }{qt, qi}); err != nil {
		return "", fmt.Errorf("render crff_cate_records: %w", err)
	}
	// Drop the leading comment: SQLite keeps a view's text from CREATE on,
	// and callers compare this statement with sqlite_schema.sql.
	s := b.String()
	if i := strings.Index(s, "CREATE VIEW"); i >= 0 {
		s = s[i:]
	}
	return strings.TrimSpace(s), nil
}

// uriEscaper escapes the characters that would end the path part of a
// file: URI.
var uriEscaper = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// FileURI returns the modernc.org/sqlite data source name of the file at
// path with the given parameters (mode, _pragma, ...). The path is given
// as a file: URI so that no character of it is taken for a parameter.
func FileURI(path string, params url.Values) string {
	return "file:" + uriEscaper.Replace(path) + "?" + params.Encode()
}
