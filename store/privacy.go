package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"
	"time"
)

// PrivacyCharge is one run's charge to a site's privacy budget, as the
// crff_privacy view shows it (see federation.Charge).
type PrivacyCharge struct {
	Run     string
	Step    string // what the charge pays for: a model's training rounds, or an aggregate
	At      time.Time
	Rounds  int     // the most rounds of the step the site answers
	Steps   int     // Gaussian mechanisms composed
	Q       float64 // the sampling rate of each
	Noise   float64
	Clip    float64
	Delta   float64
	Epsilon float64 // this run's
	Total   float64 // every run's so far, composed
	Budget  float64
	// Relation is the neighbouring relation of the guarantee, and Exact
	// the aggregates released without noise.
	Relation string
	Exact    []string
}

// AppendPrivacyCharge records c in the site's privacy ledger.
func (s *Site) AppendPrivacyCharge(ctx context.Context, c PrivacyCharge) error {
	for _, v := range []float64{c.Q, c.Noise, c.Clip, c.Delta, c.Epsilon, c.Total, c.Budget} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			return fmt.Errorf("append privacy charge of run %q to %q: %w: %+v", c.Run, s.path, ErrBadResult, c)
		}
	}
	return s.writeTx(ctx, "append privacy charge to", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO crff_privacy_charge (run, step, at, rounds, steps, q, noise, clip, delta, epsilon, total, budget, relation, exact)
			 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			c.Run, c.Step, c.At.UTC().Format(time.RFC3339Nano), c.Rounds, c.Steps, c.Q, c.Noise, c.Clip, c.Delta, c.Epsilon, c.Total, c.Budget,
			c.Relation, strings.Join(c.Exact, ","))
		return err
	})
}

// PrivacyCharges returns the site's privacy ledger, oldest first.
func (s *Site) PrivacyCharges(ctx context.Context) ([]PrivacyCharge, error) {
	rows, err := s.ro.QueryContext(ctx,
		`SELECT run, step, at, rounds, steps, q, noise, clip, delta, epsilon, total, budget, relation, exact FROM crff_privacy_charge ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("read the privacy ledger of %q: %w", s.path, err)
	}
	defer rows.Close()
	var out []PrivacyCharge
	for rows.Next() {
		var c PrivacyCharge
		var at, exact string
		if err := rows.Scan(&c.Run, &c.Step, &at, &c.Rounds, &c.Steps, &c.Q, &c.Noise, &c.Clip, &c.Delta, &c.Epsilon, &c.Total, &c.Budget, &c.Relation, &exact); err != nil {
			return nil, fmt.Errorf("read the privacy ledger of %q: %w", s.path, err)
		}
		if exact != "" {
			c.Exact = strings.Split(exact, ",")
		}
		if c.At, err = time.Parse(time.RFC3339Nano, at); err != nil {
			return nil, fmt.Errorf("read the privacy ledger of %q: charge of run %q: %w", s.path, c.Run, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the privacy ledger of %q: %w", s.path, err)
	}
	return out, nil
}
