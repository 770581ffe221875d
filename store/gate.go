package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/sqlfiles"
	"github.com/crffd/crffd/subgroup"
)

// DefaultMinArmRows is Options.MinArmRows when it is zero: the smallest
// cell a subgroup's figures are published for, as federation.min_arm_rows
// sets it for a site's run.
const DefaultMinArmRows = 5

// GATE is a subgroup's effect, a row of crff_gate (migration 0021
// documents the columns). Reason is empty for a published figure; else
// the counts and figures are zero and stored as NULL.
type GATE struct {
	Scope            Scope
	Subgroup         string
	N                int
	Treated, Control int
	Estimate         inference.Estimate
	PlugIn           float64
	Reason           string
	Sites            []string // a global row's sites; nil otherwise
}

// Reasons a subgroup has no figures, as crff_gate.reason starts them.
const (
	ReasonRefused   = "refused"
	ReasonSmallCell = "small cell"
	ReasonFailed    = "cannot run"
)

// ReadGATE returns crff_gate, by scope and subgroup.
func (s *Site) ReadGATE(ctx context.Context) ([]GATE, error) {
	var out []GATE
	err := s.readTx(ctx, "read crff_gate from", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT scope, subgroup, coalesce(n, 0), coalesce(treated, 0), coalesce(control, 0),
			coalesce(estimate, 0), coalesce(se, 0), coalesce(lower, 0), coalesce(upper, 0), coalesce(plugin, 0), coalesce(reason, ''), sites
			FROM crff_gate ORDER BY scope, subgroup`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var g GATE
			var sites sql.NullString
			e := &g.Estimate
			if err := rows.Scan(&g.Scope, &g.Subgroup, &g.N, &g.Treated, &g.Control, &e.Estimate, &e.SE, &e.Lower, &e.Upper, &g.PlugIn, &g.Reason, &sites); err != nil {
				return err
			}
			if sites.Valid {
				if err := json.Unmarshal([]byte(sites.String), &g.Sites); err != nil {
					return fmt.Errorf("%w: crff_gate sites of %q: %w", ErrCorrupt, g.Subgroup, err)
				}
			}
			e.N = g.N
			out = append(out, g)
		}
		return rows.Err()
	})
	return out, err
}

// updateLocalGATE recomputes the local rows of crff_gate of run from the
// subgroups in crff_subgroup and the rows' ψ in crff_cate. Each predicate
// is checked (subgroup.Check) against the columns of the layout's table
// before it is inlined into a query of that table alone; a refused one, or
// one SQLite cannot run, gets its reason and leaves the others be.
func (s *Site) updateLocalGATE(ctx context.Context, tx *sql.Tx, run string, l Layout) ([]GATE, error) {
	start := time.Now()
	if _, err := tx.ExecContext(ctx, `DELETE FROM crff_gate WHERE scope = ?`, ScopeLocal); err != nil {
		return nil, err
	}
	groups, err := readSubgroups(ctx, tx)
	if err != nil {
		return nil, err
	}
	if len(groups) == 0 {
		return nil, nil
	}
	names, err := columnNames(ctx, tx, l.Table)
	if err != nil {
		return nil, fmt.Errorf("columns of %q: %w", l.Table, err)
	}
	out := make([]GATE, 0, len(groups))
	for _, g := range groups {
		gate := GATE{Scope: ScopeLocal, Subgroup: g.name}
		if err := subgroup.Check(g.predicate, names); err != nil {
			gate.Reason = ReasonRefused + ": " + strings.TrimPrefix(err.Error(), subgroup.ErrRefused.Error()+": ")
		} else if err := s.localGATE(ctx, tx, l, g.predicate, &gate); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			gate = GATE{Scope: ScopeLocal, Subgroup: g.name, Reason: ReasonFailed + ": " + err.Error()}
		}
		out = append(out, gate)
	}
	if err := insertGATE(ctx, tx, run, out); err != nil {
		return nil, err
	}
	// The elapsed time is logged because the subgroups' cost is part of a
	// fit's budget (docs/benchmarks.md measures it against the fit).
	s.log.InfoContext(ctx, "subgroups evaluated", "path", s.path, "run", run, "subgroups", len(out), "elapsed", time.Since(start).Round(time.Millisecond).String())
	return out, nil
}

type subgroupDef struct{ name, predicate string }

// readSubgroups returns crff_subgroup, or an error naming the columns it
// needs when a user created it otherwise.
func readSubgroups(ctx context.Context, tx *sql.Tx) ([]subgroupDef, error) {
	rows, err := tx.QueryContext(ctx, `SELECT name, predicate FROM crff_subgroup ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("%w: crff_subgroup must have the columns name and predicate: %w", ErrBadResult, err)
	}
	defer rows.Close()
	var out []subgroupDef
	for rows.Next() {
		var name, pred sql.NullString
		if err := rows.Scan(&name, &pred); err != nil {
			return nil, err
		}
		if !name.Valid || !pred.Valid {
			// NOT NULL in crffd's table; a user's own may allow it.
			continue
		}
		out = append(out, subgroupDef{name.String, pred.String})
	}
	return out, rows.Err()
}

// localGATE fills g with the effect of the rows of l's table that pred
// selects: their ψ and raw CATEs from crff_cate, their arm from the
// treatment column. The predicate runs in a query of the table alone, so
// that crffd's own columns (run, cate, psi, …) cannot be named by it.
func (s *Site) localGATE(ctx context.Context, tx *sql.Tx, l Layout, pred string, g *GATE) error {
	q, err := quoted(l.Table, l.ID, l.Treatment)
	if err != nil {
		return err
	}
	table, id, treat := q[0], q[1], q[2]
	// Summed by SQLite, which reads 100 000 rows in a fraction of the
	// time a scan into Go takes. A treatment value counts as treated as
	// the rows were read: 1, however stored.
	query := `SELECT count(*), total(c.psi), total(c.psi * c.psi), count(c.raw_cate), total(c.raw_cate),
		total(CASE WHEN CAST(g.crff_w AS REAL) = 1 THEN 1 ELSE 0 END)
		FROM (SELECT ` + id + ` AS crff_id, ` + treat + ` AS crff_w FROM ` + table + ` WHERE (` + pred + `)) AS g
		CROSS JOIN crff_cate AS c ON c.row_id = +g.crff_id WHERE c.psi IS NOT NULL`
	var psi inference.Sums
	var raws int
	var raw, treated float64
	if err := tx.QueryRowContext(ctx, query).Scan(&psi.N, &psi.Sum, &psi.SumSq, &raws, &raw, &treated); err != nil {
		return err
	}
	g.Treated = int(treated)
	g.Control = psi.N - g.Treated
	if min(g.Treated, g.Control) < s.minArm {
		*g = GATE{Scope: g.Scope, Subgroup: g.Subgroup,
			Reason: fmt.Sprintf("%s: fewer than %d rows in an arm (federation.min_arm_rows)", ReasonSmallCell, s.minArm)}
		return nil
	}
	if g.Estimate, err = psi.Estimate(); err != nil {
		return err
	}
	g.N = psi.N
	if raws > 0 {
		g.PlugIn = raw / float64(raws)
	}
	return nil
}

func insertGATE(ctx context.Context, tx *sql.Tx, run string, gs []GATE) error {
	at := now()
	for _, g := range gs {
		var n, tr, co, est, se, lo, hi, plugin, reason, sites any
		if g.Sites != nil {
			b, err := json.Marshal(g.Sites)
			if err != nil {
				return err
			}
			sites = string(b)
		}
		if g.Reason != "" {
			reason = g.Reason
		} else {
			n, tr, co = g.N, g.Treated, g.Control
			est, se, lo, hi, plugin = g.Estimate.Estimate, g.Estimate.SE, g.Estimate.Lower, g.Estimate.Upper, g.PlugIn
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO crff_gate (scope, subgroup, n, treated, control, estimate, se, lower, upper, plugin, reason, run, computed_at, sites)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, string(g.Scope), g.Subgroup, n, tr, co, est, se, lo, hi, plugin, reason, run, at, sites); err != nil {
			return fmt.Errorf("subgroup %q: %w", g.Subgroup, err)
		}
	}
	return nil
}

// SubgroupPredicate returns the predicate crff_subgroup holds under name,
// and false when it holds none: what a site whose policy names its
// federated subgroups approved under that name.
func (s *Site) SubgroupPredicate(ctx context.Context, name string) (string, bool, error) {
	var pred string
	var ok bool
	err := s.readTx(ctx, "read a subgroup of", func(tx *sql.Tx) error {
		groups, err := readSubgroups(ctx, tx)
		if err != nil {
			return err
		}
		for _, g := range groups {
			if g.name == name {
				pred, ok = g.predicate, true
			}
		}
		return nil
	})
	return pred, ok, err
}

// SubgroupMembers reports, for each row of ids (rows of l's table), whether
// pred selects it: a federated subgroup, which the site evaluates on its
// own table. pred is checked first (subgroup.Check); a refused one is an
// error wrapping subgroup.ErrRefused.
func (s *Site) SubgroupMembers(ctx context.Context, l Layout, pred string, ids []RowID) ([]bool, error) {
	var in []bool
	err := s.readTx(ctx, "evaluate a subgroup in", func(tx *sql.Tx) error {
		names, err := columnNames(ctx, tx, l.Table)
		if err != nil {
			return err
		}
		if err := subgroup.Check(pred, names); err != nil {
			return err
		}
		q, err := quoted(l.Table, l.ID)
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+q[1]+` FROM `+q[0]+` WHERE (`+pred+`)`)
		if err != nil {
			return err
		}
		defer rows.Close()
		chosen := map[RowID]bool{}
		for rows.Next() {
			var r RowID
			if err := rows.Scan(&r); err != nil {
				continue // an id the run could not have read
			}
			chosen[r] = true
		}
		if err := rows.Err(); err != nil {
			return err
		}
		in = make([]bool, len(ids))
		for i, r := range ids {
			in[i] = chosen[r]
		}
		return nil
	})
	return in, err
}

// columnNames returns the names of the columns of table, nil when there
// is no such table or view.
func columnNames(ctx context.Context, q querier, table string) ([]string, error) {
	cols, err := tableColumns(ctx, q, table)
	if err != nil || cols == nil {
		return nil, err
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	return names, nil
}

// quoted returns the identifiers names, quoted for SQL.
func quoted(names ...string) ([]string, error) {
	out := make([]string, len(names))
	for i, n := range names {
		var err error
		if out[i], err = sqlfiles.QuoteIdent(n); err != nil {
			return nil, err
		}
	}
	return out, nil
}
