package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/crffd/crffd/inference"
)

// Heterogeneity are a run's tests of its CATE's heterogeneity and its
// policy values (migration 0024, package heterogeneity), of one scope.
type Heterogeneity struct {
	Stats  []HetStat
	CLAN   []CLAN
	Policy []Policy
}

// HetStat is a row of crff_heterogeneity: a statistic, with its p-value
// when it has one (PValue < 0: none).
type HetStat struct {
	Scope     Scope
	Statistic string
	Estimate  inference.Estimate
	PValue    float64
}

// CLAN is a row of crff_clan: a covariate's means in the top and the
// bottom fifth of τ̂ and their difference.
type CLAN struct {
	Scope               Scope
	Covariate           string
	Top, Bottom, Spread inference.Estimate
}

// Policy is a row of crff_policy: a treatment rule's share of rows
// treated, value and gains.
type Policy struct {
	Scope                    Scope
	Policy                   string
	Treats                   float64
	Value, GainNone, GainAll inference.Estimate
}

// ReadHeterogeneity returns crff_heterogeneity, crff_clan and crff_policy,
// each ordered by scope and name.
func (s *Site) ReadHeterogeneity(ctx context.Context) (Heterogeneity, error) {
	var h Heterogeneity
	err := s.readTx(ctx, "read crff_heterogeneity from", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT scope, statistic, estimate, se, lower, upper, p_value, n FROM crff_heterogeneity ORDER BY scope, statistic`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var st HetStat
			var p sql.NullFloat64
			e := &st.Estimate
			if err := rows.Scan(&st.Scope, &st.Statistic, &e.Estimate, &e.SE, &e.Lower, &e.Upper, &p, &e.N); err != nil {
				return err
			}
			st.PValue = -1
			if p.Valid {
				st.PValue = p.Float64
			}
			h.Stats = append(h.Stats, st)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		crows, err := tx.QueryContext(ctx, `SELECT scope, covariate, top, top_se, bottom, bottom_se, difference, difference_se, lower, upper, n_top, n_bottom
			FROM crff_clan ORDER BY scope, covariate`)
		if err != nil {
			return err
		}
		defer crows.Close()
		for crows.Next() {
			var c CLAN
			if err := crows.Scan(&c.Scope, &c.Covariate, &c.Top.Estimate, &c.Top.SE, &c.Bottom.Estimate, &c.Bottom.SE, &c.Spread.Estimate, &c.Spread.SE,
				&c.Spread.Lower, &c.Spread.Upper, &c.Top.N, &c.Bottom.N); err != nil {
				return err
			}
			c.Spread.N = c.Top.N + c.Bottom.N
			h.CLAN = append(h.CLAN, c)
		}
		if err := crows.Err(); err != nil {
			return err
		}
		prows, err := tx.QueryContext(ctx, `SELECT scope, policy, treats, value, value_se, value_lower, value_upper, gain_none, gain_none_se, gain_none_lower, gain_none_upper,
			gain_all, gain_all_se, gain_all_lower, gain_all_upper, n FROM crff_policy ORDER BY scope, policy`)
		if err != nil {
			return err
		}
		defer prows.Close()
		for prows.Next() {
			var p Policy
			v, g0, g1 := &p.Value, &p.GainNone, &p.GainAll
			if err := prows.Scan(&p.Scope, &p.Policy, &p.Treats, &v.Estimate, &v.SE, &v.Lower, &v.Upper, &g0.Estimate, &g0.SE, &g0.Lower, &g0.Upper,
				&g1.Estimate, &g1.SE, &g1.Lower, &g1.Upper, &v.N); err != nil {
				return err
			}
			g0.N, g1.N = v.N, v.N
			h.Policy = append(h.Policy, p)
		}
		return prows.Err()
	})
	return h, err
}

// insertHeterogeneity writes h's rows of run.
func insertHeterogeneity(ctx context.Context, tx *sql.Tx, run string, h *Heterogeneity) error {
	if h == nil {
		return nil
	}
	at := now()
	for _, st := range h.Stats {
		e := st.Estimate
		var p any
		if st.PValue >= 0 {
			p = st.PValue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO crff_heterogeneity (scope, statistic, estimate, se, lower, upper, p_value, n, run, computed_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, string(st.Scope), st.Statistic, e.Estimate, e.SE, e.Lower, e.Upper, p, e.N, run, at); err != nil {
			return fmt.Errorf("heterogeneity statistic %q: %w", st.Statistic, err)
		}
	}
	for _, c := range h.CLAN {
		if _, err := tx.ExecContext(ctx, `INSERT INTO crff_clan (scope, covariate, top, top_se, bottom, bottom_se, difference, difference_se, lower, upper, n_top, n_bottom, run, computed_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, string(c.Scope), c.Covariate, c.Top.Estimate, c.Top.SE, c.Bottom.Estimate, c.Bottom.SE,
			c.Spread.Estimate, c.Spread.SE, c.Spread.Lower, c.Spread.Upper, c.Top.N, c.Bottom.N, run, at); err != nil {
			return fmt.Errorf("covariate %q of crff_clan: %w", c.Covariate, err)
		}
	}
	for _, p := range h.Policy {
		v, g0, g1 := p.Value, p.GainNone, p.GainAll
		if _, err := tx.ExecContext(ctx, `INSERT INTO crff_policy (scope, policy, treats, value, value_se, value_lower, value_upper, gain_none, gain_none_se, gain_none_lower, gain_none_upper,
			gain_all, gain_all_se, gain_all_lower, gain_all_upper, n, run, computed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			string(p.Scope), p.Policy, p.Treats, v.Estimate, v.SE, v.Lower, v.Upper, g0.Estimate, g0.SE, g0.Lower, g0.Upper,
			g1.Estimate, g1.SE, g1.Lower, g1.Upper, v.N, run, at); err != nil {
			return fmt.Errorf("policy %q: %w", p.Policy, err)
		}
	}
	return nil
}
