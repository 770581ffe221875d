package report

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/positivity"
	"github.com/crffd/crffd/store"
)

// sitePage is what the site template shows.
type sitePage struct {
	Title     string
	File      string
	Generated string
	Run       *runInfo // nil when no results were written
	ATEs      []ateRow

	Loss        *Figure
	LossNote    string
	LossCaption template.HTML // what a round of the run's optimiser is, built from constants

	Transfer     *Figure
	TransferNote string

	CATE     *Figure
	CATENote string

	Selection     []selectionRow // crff_model_selection; empty without a choice
	SelectionRows int            // the held-out rows it was scored on

	Overlap        *Figure
	OverlapNote    string
	Arms           positivity.Counts // scored rows by arm, and outside the bounds
	Problems       []string          // the positivity rules the site fails
	Outside        int               // rows with a propensity outside the bounds
	OutsideTreated int
	OutsideControl int
	Scored         int
	Bounds         string // the positivity bounds, "[0.01, 0.99]"
	Rules          string // the positivity rules, stated
	Buckets        []store.OverlapBucket

	Audit       []auditRow
	AuditTotals []auditRow

	Balance []balanceSection // local, then global; empty without crffd check

	Privacy *privacyInfo // the latest run's privacy charges; nil without any

	GATEs  []gateRow // crff_gate
	Forest *Figure   // the subgroups with figures; nil without any

	Hetero *heteroSection // crff_heterogeneity and beside it; nil without
}

// privacyInfo is what the site's privacy ledger (crff_privacy) says of its
// latest charged run.
type privacyInfo struct {
	Run      string
	Steps    []privacyStep
	Delta    string
	Total    string // ε spent by every charge so far
	Budget   string
	Left     string
	Relation string
	Exact    string   // the aggregates released exactly, comma-separated
	Noised   []string // the aggregates released with noise (charged steps other than training)
}

type privacyStep struct {
	Step       string
	Epsilon    string
	Mechanisms int
	Rate       string
	Noise      string
}

type runInfo struct {
	ID        string
	Table     string
	Published string
}

type selectionRow struct {
	Candidate string
	Loss      string // mean loss ± its standard error
	Diff      string // paired difference from the reference ± its standard error
	Role      string // chosen, member, or empty
}

type ateRow struct {
	Scope     string
	Estimator string
	ATE       string
	SE        string
	Interval  string
	N         int
	Clipped   string
	NoiseSE   string // the part of SE that privacy noise accounts for, "-" for none
}

// auditRow sums crff_audit by direction and kind.
type auditRow struct {
	Direction string
	Kind      string
	Peers     int
	Messages  int
	Bytes     int
}

// Site writes the HTML report of the site file s to w. Sections whose data
// the file lacks (no results yet, no loss history, no audit) say so instead
// of failing; errors reading the file or drawing a figure are returned.
func Site(ctx context.Context, s *store.Site, w io.Writer) error {
	pg := &sitePage{
		Title:     "crffd site report",
		File:      s.Path(),
		Generated: time.Now().UTC().Format(time.RFC3339),
		Bounds:    positivity.Bounds(),
		Rules:     positivityRules(),
	}
	run, err := s.CurrentRun(ctx)
	switch {
	case errors.Is(err, store.ErrNoRun):
		pg.LossNote = "No results have been written to this file yet: run crffd fit or crffd site first."
		pg.TransferNote, pg.CATENote, pg.OverlapNote = pg.LossNote, pg.LossNote, pg.LossNote
	case err != nil:
		return fmt.Errorf("site report: %w", err)
	default:
		pg.Run = &runInfo{ID: run.ID, Table: run.Layout.Table, Published: run.PublishedAt.UTC().Format(time.RFC3339)}
		if err := pg.results(ctx, s, run); err != nil {
			return fmt.Errorf("site report of %q: %w", s.Path(), err)
		}
	}
	if pg.Balance, err = balanceSections(ctx, s); err != nil {
		return fmt.Errorf("site report of %q: %w", s.Path(), err)
	}
	if pg.GATEs, pg.Forest, err = gateSection(ctx, s); err != nil {
		return fmt.Errorf("site report of %q: %w", s.Path(), err)
	}
	if pg.Hetero, err = heterogeneitySection(ctx, s); err != nil {
		return fmt.Errorf("site report of %q: %w", s.Path(), err)
	}
	if pg.Privacy, err = privacySection(ctx, s); err != nil {
		return fmt.Errorf("site report of %q: %w", s.Path(), err)
	}
	audit, err := s.ReadAudit(ctx, 0, 0)
	if err != nil {
		return fmt.Errorf("site report: %w", err)
	}
	pg.Audit, pg.AuditTotals = summarizeAudit(audit)
	if err := siteTemplate.Execute(w, pg); err != nil {
		return fmt.Errorf("site report of %q: write page: %w", s.Path(), err)
	}
	return nil
}

// results fills the sections drawn from the current run's results.
func (pg *sitePage) results(ctx context.Context, s *store.Site, run store.Run) error {
	ls, err := s.ReadLoss(ctx, run.ID)
	if err != nil {
		return err
	}
	if len(ls) == 0 {
		pg.LossNote = "No loss history recorded for this run (crff_loss is empty): crffd fit and crffd site record it, but a run published by an older crffd may lack it."
	} else {
		f, err := lossPlot(ls)
		if err != nil {
			return err
		}
		pg.Loss = &f
		pg.LossCaption = lossCaption(run)
	}

	sel, err := s.ReadSelection(ctx)
	if err != nil {
		return err
	}
	for _, c := range sel {
		row := selectionRow{Candidate: c.Candidate, Loss: fmt.Sprintf("%.4g ± %.2g", c.Loss, c.SE),
			Diff: fmt.Sprintf("%+.4g ± %.2g", c.Diff, c.DiffSE)}
		switch {
		case c.Kind == "ensemble":
			row.Loss, row.Diff = fmt.Sprintf("%.4g", c.Loss), fmt.Sprintf("%+.4g", c.Diff)
			row.Role = fmt.Sprintf("chosen: the members' mean, shifted by %+.4g", c.Shift)
		case c.Member:
			row.Role = "member"
		case c.Chosen: // a single candidate chosen by a run before the ensemble
			row.Role = "chosen"
		}
		pg.Selection = append(pg.Selection, row)
		pg.SelectionRows = c.N
	}

	ts, err := s.ReadTransfer(ctx)
	if err != nil {
		return err
	}
	if len(ts) == 0 {
		pg.TransferNote = "No transfer factors: the run was fitted by this site alone (crffd fit), without a federation."
	} else {
		rows, cols, z := transferMatrix(ts)
		f, err := heatmap("λ: how much this site's models borrow from each peer's parameters", "peer site (whose parameters are borrowed)", "model of this site", rows, cols, z)
		if err != nil {
			return err
		}
		pg.Transfer = &f
	}

	ates, err := s.ReadATE(ctx)
	if err != nil {
		return err
	}
	var lines []ateLine
	for _, a := range ates {
		pg.ATEs = append(pg.ATEs, newATERow(a))
		c := colLocal
		if a.Scope == store.ScopeGlobal {
			c = colGlobal
		}
		if a.Estimator != store.EstimatorAIPW {
			continue // the plug-in ATE is in the table; the histogram is of the calibrated CATEs, whose mean is near the AIPW ATE
		}
		lines = append(lines, ateLine{name: string(a.Scope) + " AIPW", ate: a.ATE, lower: a.Lower, upper: a.Upper, color: c})
	}
	cates, err := s.ReadCATE(ctx)
	if err != nil {
		return err
	}
	pg.Scored = len(cates)
	if len(cates) == 0 {
		pg.CATENote = "No row has been scored yet."
		pg.OverlapNote = pg.CATENote
		return nil
	}
	vs := make([]float64, len(cates))
	for i, c := range cates {
		vs[i] = c.CATE
	}
	f, err := cateHist(vs, lines)
	if err != nil {
		return err
	}
	pg.CATE = &f

	treated, control, err := s.ReadPropensities(ctx)
	if err != nil {
		return err
	}
	pg.OutsideTreated, pg.OutsideControl = outside(treated), outside(control)
	pg.Outside = pg.OutsideTreated + pg.OutsideControl
	pg.Arms = positivity.Of(run.Layout.Treatment, treated, control)
	pg.Problems = pg.Arms.Problems()
	if len(treated)+len(control) == 0 {
		pg.OverlapNote = "No scored row has a treatment of 0 or 1 in the table."
	} else {
		f, err := overlapHist(treated, control, positivity.Low, positivity.High)
		if err != nil {
			return err
		}
		pg.Overlap = &f
	}
	pg.Buckets, err = s.ReadOverlap(ctx)
	return err
}

// outside counts the propensities outside the positivity bounds.
func outside(ps []float64) int {
	n := 0
	for _, p := range ps {
		if positivity.IsOutside(p) {
			n++
		}
	}
	return n
}

// positivityRules states the rules of package positivity for the page.
func positivityRules() string {
	return fmt.Sprintf("The rules: each arm should hold at least %d rows and %g%% of the rows, and at most %g%% of the rows "+
		"should have a propensity outside %s; below %d rows in an arm, crffd fit refuses to train.",
		positivity.SoftArmRows, 100*positivity.SoftArmShare, 100*positivity.MaxOutsideShare, positivity.Bounds(), positivity.MinArmRows)
}

// newATERow formats an ATE for the table of ATEs.
func newATERow(a store.ATE) ateRow {
	r := ateRow{Scope: string(a.Scope), Estimator: a.Estimator, ATE: fmt.Sprintf("%.4f", a.ATE),
		SE: "none", Interval: "none", N: a.N, Clipped: "-", NoiseSE: "-"}
	if a.NoiseSE > 0 {
		r.NoiseSE = fmt.Sprintf("%.4f", a.NoiseSE)
	}
	if !math.IsNaN(a.SE) {
		r.SE = fmt.Sprintf("%.4f", a.SE)
		r.Interval = fmt.Sprintf("[%.4f, %.4f]", a.Lower, a.Upper)
	}
	if a.Clipped >= 0 {
		r.Clipped = fmt.Sprint(a.Clipped)
	}
	return r
}

// transferMatrix arranges a site's transfer factors as models (rows) by
// peers (columns), NaN where a pair is missing.
func transferMatrix(ts []store.Transfer) (rows, cols []string, z [][]float64) {
	for _, t := range ts {
		if !slices.Contains(rows, t.Model) {
			rows = append(rows, t.Model)
		}
		if !slices.Contains(cols, t.Peer) {
			cols = append(cols, t.Peer)
		}
	}
	slices.Sort(rows)
	slices.Sort(cols)
	z = make([][]float64, len(rows))
	for i := range z {
		z[i] = make([]float64, len(cols))
		for j := range z[i] {
			z[i][j] = math.NaN()
		}
	}
	for _, t := range ts {
		z[slices.Index(rows, t.Model)][slices.Index(cols, t.Peer)] = t.Lambda
	}
	return rows, cols, z
}

// summarizeAudit sums the audit log by direction and kind, and by direction
// alone.
func summarizeAudit(es []store.AuditEntry) (byKind, totals []auditRow) {
	type key struct{ dir, kind string }
	rows := map[key]*auditRow{}
	peers := map[key]map[string]bool{}
	for _, e := range es {
		for _, k := range []key{{string(e.Direction), e.Kind}, {string(e.Direction), ""}} {
			r := rows[k]
			if r == nil {
				r = &auditRow{Direction: k.dir, Kind: k.kind}
				rows[k] = r
				peers[k] = map[string]bool{}
			}
			r.Messages++
			r.Bytes += e.Bytes
			peers[k][e.Peer] = true
			r.Peers = len(peers[k])
		}
	}
	for k, r := range rows {
		if k.kind == "" {
			r.Kind = "all"
			totals = append(totals, *r)
		} else {
			byKind = append(byKind, *r)
		}
	}
	order := func(a, b auditRow) int {
		return cmp.Or(cmp.Compare(b.Direction, a.Direction), cmp.Compare(a.Kind, b.Kind))
	}
	slices.SortFunc(byKind, order)
	slices.SortFunc(totals, order)
	return byKind, totals
}

// lossCaption says what a round of the run's optimiser is, from the
// configuration saved with its model: L-BFGS evaluates the objective at
// trial steps of a line search, Adam takes one step per round.
func lossCaption(run store.Run) template.HTML {
	const common = "The loss J<sup>(s)</sup> this site computed at each round of training. "
	var setup modelstore.Setup
	if run.Setup == nil || json.Unmarshal(run.Setup, &setup) != nil {
		return template.HTML(common + "The run's optimiser was not recorded.")
	}
	switch setup.Config.Method {
	case estimator.LBFGS:
		return template.HTML(common + "The optimiser was L-BFGS: a round is one evaluation of the objective on every row, and a spike is a trial step of its line search, which it then rejected.")
	case estimator.Adam:
		const adam = "The optimiser was Adam, which has no line search: a round is one step"
		if setup.Config.BatchSize <= 0 {
			return template.HTML(common + adam + ", computed on every row with fresh noise draws of the latent model, so the curve is noisy from round to round.")
		}
		return template.HTML(common + fmt.Sprintf(adam+", computed on a random batch of up to %d rows (model.batch_size) when the site has more, with fresh noise draws of the latent model, so the curve is noisy from round to round.", setup.Config.BatchSize))
	}
	return template.HTML(common + fmt.Sprintf("The optimiser was %v.", setup.Config.Method))
}

// privacySection reads the site's privacy ledger: the charges of its
// latest charged run, the aggregates that run released exactly and with
// noise, and what the budget has left; nil when the ledger is empty.
func privacySection(ctx context.Context, s *store.Site) (*privacyInfo, error) {
	cs, err := s.PrivacyCharges(ctx)
	if err != nil || len(cs) == 0 {
		return nil, err
	}
	last := cs[len(cs)-1]
	p := &privacyInfo{Run: last.Run, Delta: fmt.Sprintf("%g", last.Delta), Total: fmt.Sprintf("%.4g", last.Total),
		Budget: fmt.Sprintf("%.4g", last.Budget), Left: fmt.Sprintf("%.4g", math.Max(0, last.Budget-last.Total)),
		Relation: last.Relation, Exact: strings.Join(last.Exact, ", ")}
	if p.Exact == "" {
		p.Exact = "none recorded (a charge of a crffd older than the exact column)"
	}
	for _, c := range cs {
		if c.Run != last.Run {
			continue
		}
		p.Steps = append(p.Steps, privacyStep{Step: c.Step, Epsilon: fmt.Sprintf("%.4g", c.Epsilon), Mechanisms: c.Steps,
			Rate: fmt.Sprintf("%.4g", c.Q), Noise: fmt.Sprintf("%.4g", c.Noise)})
		if !strings.HasPrefix(c.Step, "training") {
			p.Noised = append(p.Noised, c.Step)
		}
	}
	return p, nil
}
