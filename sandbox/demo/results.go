package demo

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/positivity"
	"github.com/crffd/crffd/selection"
	"github.com/crffd/crffd/store"
)

// site is what the demo reads back from one site file.
type site struct {
	name                  string
	n                     int
	local, global, trueTE float64 // AIPW ATEs and the truth
	localLo, localHi      float64 // the local AIPW interval
	globalLo, globalHi    float64 // the global AIPW interval
	localPlugIn           float64 // the mean of the chosen estimator's CATEs
	pehe, ateErr          float64
	treated, control      int                           // scored rows by arm
	extreme               int                           // scored rows with a propensity outside the positivity bounds
	lambda                map[string]map[string]float64 // model → peer → λ
	candidates            []selection.Candidate         // crff_model_selection, in order; none when the run chose no model
	chosen, held          int                           // the chosen candidate; every site's held-out rows
	shift                 float64                       // the chosen ensemble's shift
}

// readSite reads back the results of the site name from its file at path.
func readSite(ctx context.Context, path, name string) (site, error) {
	s := site{name: name, lambda: map[string]map[string]float64{}}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return s, err
	}
	defer db.Close()
	if s.n, s.trueTE, s.pehe, err = readTruth(ctx, db); err != nil {
		return s, fmt.Errorf("read %s: %w", path, err)
	}
	for _, q := range []struct {
		scope     string
		ate, l, u *float64
	}{{"local", &s.local, &s.localLo, &s.localHi}, {"global", &s.global, &s.globalLo, &s.globalHi}} {
		if err := db.QueryRowContext(ctx, `SELECT ate, lower, upper FROM crff_ate WHERE scope = ? AND estimator = 'aipw'`, q.scope).Scan(q.ate, q.l, q.u); err != nil {
			return s, fmt.Errorf("read the %s ATE of %s: %w", q.scope, path, err)
		}
	}
	if err := db.QueryRowContext(ctx, `SELECT ate FROM crff_ate WHERE scope = 'local' AND estimator = 'plugin'`).Scan(&s.localPlugIn); err != nil {
		return s, fmt.Errorf("read the local plug-in ATE of %s: %w", path, err)
	}
	s.ateErr = math.Abs(s.local - s.trueTE)
	if err := db.QueryRowContext(ctx, `SELECT coalesce(sum(treated), 0), coalesce(sum(control), 0),
		coalesce(sum(CASE WHEN extreme THEN treated + control END), 0) FROM crff_overlap`).Scan(&s.treated, &s.control, &s.extreme); err != nil {
		return s, fmt.Errorf("read the overlap of %s: %w", path, err)
	}
	if err := readSelection(ctx, path, &s); err != nil {
		return s, fmt.Errorf("read crff_model_selection of %s: %w", path, err)
	}
	rows, err := db.QueryContext(ctx, `SELECT model, peer, lambda FROM crff_transfer`)
	if err != nil {
		return s, fmt.Errorf("read %s: %w", path, err)
	}
	defer rows.Close()
	for rows.Next() {
		var model, peer string
		var l float64
		if err := rows.Scan(&model, &peer, &l); err != nil {
			return s, err
		}
		if s.lambda[model] == nil {
			s.lambda[model] = map[string]float64{}
		}
		s.lambda[model][peer] = l
	}
	return s, rows.Err()
}

// readSelection reads the run's model selection of the site file at
// path into s, through store.Site.ReadSelection.
func readSelection(ctx context.Context, path string, s *site) error {
	db, err := store.Open(ctx, path, store.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.ReadSelection(ctx)
	if err != nil {
		return err
	}
	for _, r := range rows {
		c := selection.Candidate{Name: r.Candidate, Kind: r.Kind, Ridge: r.Ridge}
		c.Loss, c.SE, c.Diff, c.DiffSE, c.Chosen, c.Member = r.Loss, r.SE, r.Diff, r.DiffSE, r.Chosen, r.Member
		if c.Chosen {
			s.chosen, s.shift = len(s.candidates), r.Shift
		}
		s.held = r.N
		s.candidates = append(s.candidates, c)
	}
	return nil
}

// printResults prints the demo's report of the sites names in dir.
func printResults(ctx context.Context, w io.Writer, dir string, names []string) error {
	var sites []site
	var sumN, sumATE, sumTrue float64
	for _, n := range names {
		s, err := readSite(ctx, filepath.Join(dir, n+".sqlite"), n)
		if err != nil {
			return err
		}
		sites = append(sites, s)
		sumN += float64(s.n)
		sumATE += float64(s.n) * s.local
		sumTrue += float64(s.n) * s.trueTE
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SITE\tROWS\tTREATED\tLOCAL ATE\tTRUE ATE\tSQRT(PEHE)\tATE ERROR\t95% INTERVAL\tPLUG-IN ATE")
	for _, s := range sites {
		fmt.Fprintf(tw, "%s\t%d\t%.0f%%\t%.4f\t%.4f\t%.4f\t%.4f\t[%.4f, %.4f] %s\t%.4f\n", s.name, s.n, 100*float64(s.treated)/float64(max(s.treated+s.control, 1)),
			s.local, s.trueTE, s.pehe, s.ateErr, s.localLo, s.localHi, covers(s.localLo, s.localHi, s.trueTE), s.localPlugIn)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range sites {
		if line := positivityNote(s); line != "" {
			fmt.Fprintln(w, line)
		}
	}
	global, truth := sites[0].global, sumTrue/sumN
	fmt.Fprintf(w, "\nglobal ATE %.4f (n-weighted mean of the local ATEs: %.4f); true %.4f; error %.4f; 95%% interval [%.4f, %.4f] %s\n",
		global, sumATE/sumN, truth, math.Abs(global-truth), sites[0].globalLo, sites[0].globalHi, covers(sites[0].globalLo, sites[0].globalHi, truth))
	fmt.Fprintln(w, "ATEs are doubly robust (AIPW) estimates with cross-fitted nuisance models; the plug-in ATE is the mean of the chosen estimator's CATEs, without a standard error; sqrt(PEHE) is of the reported CATEs in crff_cate (the chosen estimator's, with their doubly robust calibration).")
	if s := sites[0]; len(s.candidates) > 0 {
		fmt.Fprintln(w)
		shifts := make([]float64, len(sites))
		for i, site := range sites {
			shifts[i] = site.shift
		}
		if err := selection.WriteText(w, s.candidates, s.chosen, s.held, math.NaN(), shifts); err != nil {
			return err
		}
		writeOwnMembers(w, sites)
	}

	if err := printTransfer(w, sites, names); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, k := range estimator.Kinds {
		if line := borrowSummary(sites, names, k.String()); line != "" {
			fmt.Fprintln(w, line)
		}
	}
	return nil
}

// printTransfer prints the transfer factors λ of each model: a row per
// site of sites, a column per site of names it borrows from.
func printTransfer(w io.Writer, sites []site, names []string) error {
	for _, k := range estimator.Kinds {
		m := k.String()
		if sites[0].lambda[m] == nil {
			continue
		}
		fmt.Fprintf(w, "\ntransfer factors λ of the %s model (row: the site; column: the site it borrows from)\n", m)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "\t"+strings.Join(names, "\t"))
		for _, s := range sites {
			cells := []string{s.name}
			for _, peer := range names {
				if l, ok := s.lambda[m][peer]; ok {
					cells = append(cells, fmt.Sprintf("%.3f", l))
				} else {
					cells = append(cells, "-")
				}
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// printQueries prints SQL to look at a kept demo's results.
func printQueries(w io.Writer, dir string) error {
	site1 := filepath.Join(dir, "site1.sqlite")
	_, err := fmt.Fprintf(w, `
Look at the results with any SQLite client:
  sqlite3 %[1]s 'SELECT * FROM crff_cate ORDER BY cate DESC LIMIT 10'
  sqlite3 %[1]s 'SELECT scope, estimator, ate, se, lower, upper, n FROM crff_ate'
  sqlite3 %[1]s 'SELECT candidate, loss, se, diff, diff_se, chosen FROM crff_model_selection'
  sqlite3 %[1]s 'SELECT kind, direction, count(*), sum(bytes) FROM crff_audit GROUP BY kind, direction'
`, site1)
	return err
}

// positivityNote returns a warning line when site s fails the rules of
// package positivity (an arm below the soft minimum, or too many rows with
// a propensity outside the bounds), in the words crffd fit, crffd report
// and crff_positivity use, and "" otherwise: the demo's third site is meant
// to be dissimilar, and this says what that does to its estimates.
func positivityNote(s site) string {
	c := positivity.Counts{Treated: s.treated, Control: s.control, Outside: s.extreme}
	w := c.Warning()
	if w == "" {
		return ""
	}
	return fmt.Sprintf("positivity: %s: %s; its effects rest on extrapolation (see crff_positivity and crff_overlap)", s.name, w)
}

// borrowSummary compares, for one model, the mean factor with which the
// other sites borrow from the dissimilar site (the last) against the mean
// factor among the similar sites, and says which is smaller: a statement
// of what was measured, not of what should have happened.
func borrowSummary(sites []site, names []string, model string) string {
	last := names[len(names)-1]
	var toLast, among float64
	var nLast, nAmong int
	for _, s := range sites[:len(sites)-1] {
		for peer, l := range s.lambda[model] {
			if peer == last {
				toLast += l
				nLast++
			} else {
				among += l
				nAmong++
			}
		}
	}
	if nLast == 0 || nAmong == 0 {
		return ""
	}
	toLast /= float64(nLast)
	among /= float64(nAmong)
	verdict := "borrowed from least"
	if toLast >= among {
		verdict = "NOT borrowed from least"
	}
	return fmt.Sprintf("%s model: the dissimilar %s is %s (mean λ toward it %.3f; among the similar sites %.3f)", model, last, verdict, toLast, among)
}

// covers says whether the interval [lo, hi] holds the true value.
func covers(lo, hi, truth float64) string {
	if lo <= truth && truth <= hi {
		return "(covers the truth)"
	}
	return "(misses the truth)"
}

// writeOwnMembers writes, when the sites chose their members each on its
// own (model.selection_by_site), which each one chose: crff_model_selection
// marks the site's own members.
func writeOwnMembers(w io.Writer, sites []site) {
	members := make([][]string, len(sites))
	same := true
	for i, s := range sites {
		for _, c := range s.candidates {
			if c.Member && c.Kind != selection.KindEnsemble {
				members[i] = append(members[i], c.Name)
			}
		}
		same = same && slices.Equal(members[i], members[0])
	}
	if same {
		return
	}
	fmt.Fprintln(w, "  each site's own choice, on its held-out rows with the others' evidence pooled in (model.selection_by_site):")
	for i, s := range sites {
		fmt.Fprintf(w, "    %s: %s\n", s.name, strings.Join(members[i], ", "))
	}
}
