package store

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// Tensor is a named array of float64 values in row-major order: a weight
// block or a shared scalar of a model. A scalar has an empty Shape and one
// value.
type Tensor struct {
	Name   string
	Shape  []int
	Values []float64
}

// size returns the number of values Shape calls for, or -1 when a dimension
// is negative or the product overflows.
func (t Tensor) size() int {
	n := 1
	for _, d := range t.Shape {
		if d < 0 || (d > 0 && n > math.MaxInt32/d) {
			return -1
		}
		n *= d
	}
	return n
}

// encode returns the values as little-endian IEEE 754 doubles.
func (t Tensor) encode() []byte {
	b := make([]byte, 8*len(t.Values))
	for i, v := range t.Values {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	return b
}

// decodeValues is the inverse of encode.
func decodeValues(b []byte) ([]float64, error) {
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("%d bytes is not a whole number of float64 values", len(b))
	}
	vs := make([]float64, len(b)/8)
	for i := range vs {
		vs[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return vs, nil
}

// ModelState is one model's state at a site in one run: the effective
// weights and shared scalars the site last received, and the round they
// belong to.
type ModelState struct {
	Run     string
	Model   string // "propensity", "outcome", "latent", ...
	Round   int
	Tensors []Tensor
	SavedAt time.Time // set when loaded; ignored when saving
}

// SaveModel stores m, replacing the state saved before for the same run and
// model, in one transaction. The run must exist (BeginRun). Values are kept
// bit for bit, NaN and infinities included.
func (s *Site) SaveModel(ctx context.Context, m ModelState) error {
	op := fmt.Sprintf("save model %q of run %q to", m.Model, m.Run)
	if m.Model == "" || m.Round < 0 {
		return fmt.Errorf("%s %q: %w: empty model name or negative round", op, s.path, ErrBadResult)
	}
	names := map[string]bool{}
	for _, t := range m.Tensors {
		if t.Name == "" || names[t.Name] {
			return fmt.Errorf("%s %q: %w: tensor name %q empty or repeated", op, s.path, ErrBadResult, t.Name)
		}
		names[t.Name] = true
		if n := t.size(); n != len(t.Values) {
			return fmt.Errorf("%s %q: %w: tensor %q of shape %v has %d values", op, s.path, ErrBadResult, t.Name, t.Shape, len(t.Values))
		}
	}
	return s.writeTx(ctx, op, func(tx *sql.Tx) error {
		if _, err := runState(ctx, tx, m.Run); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM crff_model WHERE run = ? AND model = ?`, m.Run, m.Model); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO crff_model (run, model, round, saved_at) VALUES (?, ?, ?, ?)`,
			m.Run, m.Model, m.Round, now()); err != nil {
			return err
		}
		st, err := tx.PrepareContext(ctx,
			`INSERT INTO crff_model_tensor (run, model, name, shape, value) VALUES (?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, t := range m.Tensors {
			shape := t.Shape
			if shape == nil {
				shape = []int{}
			}
			js, err := json.Marshal(shape)
			if err != nil {
				return err
			}
			if _, err := st.ExecContext(ctx, m.Run, m.Model, t.Name, string(js), t.encode()); err != nil {
				return fmt.Errorf("tensor %q: %w", t.Name, err)
			}
		}
		return nil
	})
}

// LoadModel returns the state saved for run and model, its tensors in name
// order, or an error wrapping ErrNoModel.
func (s *Site) LoadModel(ctx context.Context, run, model string) (ModelState, error) {
	m := ModelState{Run: run, Model: model}
	err := s.readTx(ctx, fmt.Sprintf("load model %q of run %q from", model, run), func(tx *sql.Tx) error {
		var at string
		err := tx.QueryRowContext(ctx, `SELECT round, saved_at FROM crff_model WHERE run = ? AND model = ?`,
			run, model).Scan(&m.Round, &at)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNoModel
		}
		if err != nil {
			return err
		}
		if m.SavedAt, err = parseTime(at); err != nil {
			return fmt.Errorf("%w: saved_at: %w", ErrCorrupt, err)
		}
		rows, err := tx.QueryContext(ctx,
			`SELECT name, shape, value FROM crff_model_tensor WHERE run = ? AND model = ? ORDER BY name`, run, model)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var t Tensor
			var shape string
			var value []byte
			if err := rows.Scan(&t.Name, &shape, &value); err != nil {
				return err
			}
			if err := json.Unmarshal([]byte(shape), &t.Shape); err != nil {
				return fmt.Errorf("%w: tensor %q: shape: %w", ErrCorrupt, t.Name, err)
			}
			if t.Values, err = decodeValues(value); err != nil {
				return fmt.Errorf("%w: tensor %q: %w", ErrCorrupt, t.Name, err)
			}
			if n := t.size(); n != len(t.Values) {
				return fmt.Errorf("%w: tensor %q of shape %v has %d values", ErrCorrupt, t.Name, t.Shape, len(t.Values))
			}
			m.Tensors = append(m.Tensors, t)
		}
		return rows.Err()
	})
	if err != nil {
		return ModelState{}, err
	}
	return m, nil
}
