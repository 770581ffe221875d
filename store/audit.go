package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// Direction says whether an audited envelope left the site or arrived.
type Direction string

// Directions of crff_audit.
const (
	Sent     Direction = "sent"
	Received Direction = "received"
)

// TensorInfo names a tensor of an envelope and gives its shape; it never
// holds values.
type TensorInfo struct {
	Name  string `json:"name"`
	Shape []int  `json:"shape"`
}

// AuditEntry is one line of crff_audit: an envelope this site sent or
// received, described without its values, so that the site's operator can
// check with SQL what left the site.
type AuditEntry struct {
	ID        int64     // set when read back; ignored when appending
	Time      time.Time // zero means now
	Direction Direction
	Peer      string // the other party: the coordinator or a site
	Kind      string // hello, weights, gradient, ate, ...
	Run       string
	Model     string // empty for envelopes about no one model
	Round     int
	Tensors   []TensorInfo
	Bytes     int    // size of the payload
	Digest    string // hex SHA-256 of the payload
}

// AppendAudit adds e to crff_audit. The table is append-only: SQLite itself
// refuses an UPDATE of it.
func (s *Site) AppendAudit(ctx context.Context, e AuditEntry) error {
	if e.Direction != Sent && e.Direction != Received {
		return fmt.Errorf("audit to %q: direction %q: must be sent or received", s.path, e.Direction)
	}
	if e.Bytes < 0 {
		return fmt.Errorf("audit to %q: negative size %d", s.path, e.Bytes)
	}
	at := now()
	if !e.Time.IsZero() {
		at = formatTime(e.Time)
	}
	ts := make([]TensorInfo, len(e.Tensors))
	for i, t := range e.Tensors {
		if t.Shape == nil {
			t.Shape = []int{}
		}
		ts[i] = t
	}
	js, err := json.Marshal(ts)
	if err != nil {
		return fmt.Errorf("audit to %q: %w", s.path, err)
	}
	return s.writeTx(ctx, "audit to", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO crff_audit (at, direction, peer, kind, run, model, round, tensors, bytes, digest)
			 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			at, string(e.Direction), e.Peer, e.Kind, e.Run, e.Model, e.Round, string(js), e.Bytes, e.Digest)
		return err
	})
}

// ReadAudit returns the crff_audit entries with an id greater than after
// (0 for all), oldest first, at most limit of them (0 for no limit).
func (s *Site) ReadAudit(ctx context.Context, after int64, limit int) ([]AuditEntry, error) {
	if limit <= 0 {
		limit = -1
	}
	var out []AuditEntry
	err := s.readTx(ctx, "read crff_audit from", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx,
			`SELECT id, at, direction, peer, kind, run, model, round, tensors, bytes, digest
			 FROM crff_audit WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e AuditEntry
			var at, ts string
			if err := rows.Scan(&e.ID, &at, &e.Direction, &e.Peer, &e.Kind, &e.Run, &e.Model, &e.Round, &ts, &e.Bytes, &e.Digest); err != nil {
				return err
			}
			if e.Time, err = parseTime(at); err != nil {
				return fmt.Errorf("%w: crff_audit.at: %w", ErrCorrupt, err)
			}
			if err := json.Unmarshal([]byte(ts), &e.Tensors); err != nil {
				return fmt.Errorf("%w: crff_audit.tensors: %w", ErrCorrupt, err)
			}
			out = append(out, e)
		}
		return rows.Err()
	})
	return out, err
}
