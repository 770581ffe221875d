package sqlfiles

import (
	"context"
	"database/sql"
	"fmt"
)

// Querier is what *sql.DB, *sql.Conn and *sql.Tx have in common.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// SchemaVersion returns the number of the last migration recorded in the
// file's crff_schema_version, or 0 for a file without that table.
func SchemaVersion(ctx context.Context, q Querier) (int, error) {
	var n int
	err := q.QueryRowContext(ctx,
		`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'crff_schema_version'`).Scan(&n)
	if err != nil || n == 0 {
		return 0, err
	}
	var v int
	err = q.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM crff_schema_version`).Scan(&v)
	return v, err
}

// Apply runs the migrations of ms that follow version have, in order, in
// tx, and records each in crff_schema_version as applied at now (RFC 3339
// text). The caller holds tx's write lock from the start (BEGIN IMMEDIATE),
// read have in it, and commits: then the file moves from one version to the
// other whole or not at all. This is the one way crffd changes the schema
// of its SQLite files, a site's and a coordinator's alike.
func Apply(ctx context.Context, tx *sql.Tx, ms []Migration, have int, now string) error {
	for _, m := range ms {
		if m.Version <= have {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
		}
		if err := Record(ctx, tx, m, now); err != nil {
			return err
		}
	}
	return nil
}

// Record records m in crff_schema_version as applied at now without
// running it: for a file that got m's changes before it had a schema
// version.
func Record(ctx context.Context, tx *sql.Tx, m Migration, now string) error {
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO crff_schema_version (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, m.Name, now); err != nil {
		return fmt.Errorf("record migration %04d_%s: %w", m.Version, m.Name, err)
	}
	return nil
}
