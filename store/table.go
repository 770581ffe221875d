package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/crffd/crffd/sqlfiles"
)

// ErrTableExists means that a table or view of the name already exists and
// replacing it was not asked for.
var ErrTableExists = errors.New("table already exists")

// ErrReservedName means that a table name is reserved for crffd (crff_…)
// or SQLite (sqlite_…).
var ErrReservedName = errors.New("reserved table name")

// ColumnType is the declared type of a column of a table that crffd
// creates for the user (ImportCSV, CreateTable).
type ColumnType string

// Column types.
const (
	Integer ColumnType = "INTEGER"
	Real    ColumnType = "REAL"
	Text    ColumnType = "TEXT"
)

// Column is a column of a table to create.
type Column struct {
	Name string
	Type ColumnType
}

// CreateTable creates the user table name with cols and fills it with rows,
// all in one transaction: either the whole table is there afterwards, or
// nothing changed. Each row holds one value per column: nil (NULL), an
// integer, a float64, a string or a []byte. An existing table or view of the
// same name (compared case-insensitively, as SQLite does) is an error
// wrapping ErrTableExists, unless replace is set, when it is dropped first.
// It is how `crffd simulate` and `crffd import` write records: the only
// writes crffd makes to tables that are not its own, and only on request.
func (s *Site) CreateTable(ctx context.Context, name string, cols []Column, rows [][]any, replace bool) error {
	for i, r := range rows {
		if len(r) != len(cols) {
			return fmt.Errorf("create table %q in %q: row %d has %d values for %d columns", name, s.path, i+1, len(r), len(cols))
		}
	}
	return s.CreateTableRows(ctx, name, cols, len(rows), func(i int, dst []any) error {
		copy(dst, rows[i])
		return nil
	}, replace)
}

// CreateTableRows is CreateTable of n rows that row makes one at a time,
// row i into dst (one value per column, reused from row to row), so that
// the rows need not all be held at once: `crffd simulate` held ten
// million rows of 33 values as [][]any and passed 18.6 GB before it was
// stopped (5.4 GB without). An error from row stops the transaction, and
// the table is not created.
func (s *Site) CreateTableRows(ctx context.Context, name string, cols []Column, n int, row func(i int, dst []any) error, replace bool) error {
	if err := checkTableName(name); err != nil {
		return fmt.Errorf("create table %q in %q: %w", name, s.path, err)
	}
	create, insert, err := tableSQL(name, cols)
	if err != nil {
		return fmt.Errorf("create table %q in %q: %w", name, s.path, err)
	}
	return s.writeTx(ctx, "create table in", func(tx *sql.Tx) error {
		if err := dropForReplace(ctx, tx, name, replace); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, create); err != nil {
			return fmt.Errorf("table %q: %w", name, err)
		}
		tuple := insert[strings.LastIndex(insert, " VALUES ")+len(" VALUES "):]
		prepare := func(rows int) (*sql.Stmt, error) {
			return tx.PrepareContext(ctx, insert+strings.Repeat(", "+tuple, rows-1))
		}
		per := max(1, min(tableRowsPerInsert, maxVariables/len(cols)))
		return insertRows(ctx, tx, prepare, len(cols), per, n, row,
			func(i int) string { return fmt.Sprintf("table %q: row %d", name, i+1) })
	})
}

// tableRowsPerInsert is how many rows one INSERT of CreateTableRows
// writes, and maxVariables the most values SQLite binds to one statement.
const (
	tableRowsPerInsert = 64
	maxVariables       = 32766
)

// checkTableName refuses names SQLite cannot hold or that are reserved.
func checkTableName(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	l := strings.ToLower(name)
	if strings.HasPrefix(l, "crff_") || strings.HasPrefix(l, "sqlite_") {
		return fmt.Errorf("%w: %q (crff_ and sqlite_ names belong to crffd and SQLite)", ErrReservedName, name)
	}
	return nil
}

// tableSQL returns the CREATE TABLE and INSERT statements of a table.
func tableSQL(name string, cols []Column) (create, insert string, err error) {
	if len(cols) == 0 {
		return "", "", errors.New("no columns")
	}
	qt, err := sqlfiles.QuoteIdent(name)
	if err != nil {
		return "", "", err
	}
	var c, in strings.Builder
	seen := map[string]bool{}
	for i, col := range cols {
		qc, err := sqlfiles.QuoteIdent(col.Name)
		if err != nil {
			return "", "", fmt.Errorf("column %d: %w", i+1, err)
		}
		k := strings.ToLower(col.Name)
		if seen[k] {
			return "", "", fmt.Errorf("column %q appears twice", col.Name)
		}
		seen[k] = true
		switch col.Type {
		case Integer, Real, Text:
		default:
			return "", "", fmt.Errorf("column %q: type %q: must be INTEGER, REAL or TEXT", col.Name, col.Type)
		}
		if i > 0 {
			c.WriteString(", ")
			in.WriteString(", ")
		}
		c.WriteString(qc + " " + string(col.Type))
		in.WriteString("?")
	}
	return "CREATE TABLE " + qt + " (" + c.String() + ")",
		"INSERT INTO " + qt + " VALUES (" + in.String() + ")", nil
}

// dropForReplace drops the table or view name when replace is set, and
// fails with ErrTableExists when it exists and replace is not set.
func dropForReplace(ctx context.Context, tx *sql.Tx, name string, replace bool) error {
	var typ, have string
	err := tx.QueryRowContext(ctx,
		`SELECT type, name FROM sqlite_schema WHERE type IN ('table', 'view') AND name = ? COLLATE NOCASE`,
		name).Scan(&typ, &have)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if !replace {
		return fmt.Errorf("%w: %s %q (replace it explicitly to overwrite it)", ErrTableExists, typ, have)
	}
	q, err := sqlfiles.QuoteIdent(have)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, "DROP "+strings.ToUpper(typ)+" "+q)
	return err
}
