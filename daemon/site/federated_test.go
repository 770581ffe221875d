package site

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/federation/federationtest"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/store"
)

// rowsSite is a site file of n rows in a table "records" (id, w, y, x1, x2),
// opened as the site daemon opens it.
type rowsSite struct {
	name string
	path string
	db   *store.Site
	src  store.Source
}

func newRowsSite(t *testing.T, name string, n int, seed uint64) *rowsSite {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".sqlite")
	db, err := store.Open(context.Background(), path, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := &rowsSite{name: name, path: path, db: db, src: store.Source{DB: path, Table: "records", IDColumn: "id",
		TreatmentColumn: "w", OutcomeColumn: "y", Covariates: []string{"x1", "x2"}}}
	s.exec(t, `CREATE TABLE records (id INTEGER PRIMARY KEY, w INTEGER, y REAL, x1 REAL, x2 REAL)`)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := 1; i <= n; i++ {
		s.exec(t, `INSERT INTO records VALUES (?, ?, ?, ?, ?)`, i, i%2, r.NormFloat64()+float64(i%2), r.NormFloat64(), r.NormFloat64())
	}
	return s
}

// exec changes the site's table as its users would, through their own
// connection.
func (s *rowsSite) exec(t *testing.T, query string, args ...any) {
	t.Helper()
	raw, err := sql.Open("sqlite", s.path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// runFederation runs one federation run over fresh in-memory connections,
// each site configured as runFederated configures it, and returns each
// site's error and the coordinator's.
func runFederation(t *testing.T, log *slog.Logger, run string, sites ...*rowsSite) ([]error, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	net := federationtest.NewMemNetwork()
	errs := make([]chan error, len(sites))
	var names []string
	for i, s := range sites {
		recs, err := s.db.ReadRecords(ctx, s.src)
		if err != nil {
			t.Fatal(err)
		}
		cfg := federation.SiteConfig{Name: s.name, Coordinator: "coord", Data: recs.Data, Schema: recs.Schema,
			Columns: recs.Layout.Covariates, Spectral: estimator.GaussianSpectral{}, Logger: log,
			MinArmRows: federation.DefaultMinArmRows,
			Join:       joinRun(log, s.db, s.name, func() *store.Records { return recs }, federation.DefaultMinArmRows),
			Audit: func(ctx context.Context, d federation.Direction, e *wire.Envelope) error {
				return s.db.AppendAudit(ctx, auditEntry(d, e))
			}}
		errs[i] = make(chan error, 1)
		go func() {
			_, err := federation.RunSite(ctx, cfg, net.Endpoint(s.name))
			errs[i] <- err
		}()
		names = append(names, s.name)
	}
	c := estimator.DefaultConfig()
	c.Features, c.Latent, c.Rounds, c.Samples, c.Workers = 10, 2, 4, 10, 1
	// A round timeout that a refused run must not wait out: the refusal
	// stops it at once.
	_, cerr := federation.RunCoordinator(ctx, federation.CoordinatorConfig{Name: "coord", RunID: run, Sites: names,
		Config: c, Spectral: estimator.GaussianSpectral{}, RoundTimeout: 20 * time.Second, Retries: 1},
		net.Endpoint("coord"))
	// A coordinator that stops tells the sites the run is aborted, after
	// every envelope it sent them before.
	out := make([]error, len(sites))
	for i := range errs {
		out[i] = <-errs[i]
	}
	return out, cerr
}

// TestFederatedSiteRefusesRunsDifferingByFewRows runs a long-lived site's
// runs one after another, changing its table in between: a run whose rows
// differ from those of any earlier run by 1 to min_arm_rows−1 rows is
// refused before the site sends anything computed from its rows, naming
// the site and the earlier run: the site sends the coordinator one refusal
// (audited in crff_audit), and the coordinator stops at once, naming the
// site and the reason; no change, or min_arm_rows changes or more, runs.
func TestFederatedSiteRefusesRunsDifferingByFewRows(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	site1, site2 := newRowsSite(t, "site1", 30, 1), newRowsSite(t, "site2", 30, 2)
	for _, step := range []struct {
		name, change, run, want string
	}{
		{"first run", "", "run-1", ""},
		{"one row added", `INSERT INTO records VALUES (31, 1, 0.5, 0.25, -1)`, "run-2",
			"site1: its rows differ from those of run run-1 by 1 (added 1, deleted 0, edited 0); a run is refused until they differ by at least 5 or not at all"},
		{"one more added, one edited, one deleted", `INSERT INTO records VALUES (32, 0, 0.5, 0.25, -1);
			UPDATE records SET y = 7 WHERE id = 3; DELETE FROM records WHERE id = 4`, "run-2",
			"site1: its rows differ from those of run run-1 by 4 (added 2, deleted 1, edited 1)"},
		{"five rows changed", `INSERT INTO records VALUES (33, 1, 0.5, 0.25, -1)`, "run-2", ""},
		{"no change", "", "run-3", ""},
		{"one row edited since run-3", `UPDATE records SET x1 = 0 WHERE id = 5`, "run-4",
			"site1: its rows differ from those of run run-2 by 1 (added 0, deleted 0, edited 1)"},
	} {
		if step.change != "" {
			site1.exec(t, step.change)
		}
		logs.Reset()
		audited := lastAudit(t, site1)
		errs, cerr := runFederation(t, log, step.run, site1, site2)
		if step.want == "" {
			if cerr != nil || errs[0] != nil || errs[1] != nil {
				t.Fatalf("%s: coordinator %v, sites %v; want the run to complete", step.name, cerr, errs)
			}
			continue
		}
		if !errors.Is(errs[0], store.ErrTooFewChanged) || !strings.Contains(errs[0].Error(), step.want) {
			t.Fatalf("%s: site1: %v, want ErrTooFewChanged: %s", step.name, errs[0], step.want)
		}
		const refused = "site1 refused the run: its rows differ too little from an earlier run's (federation.min_arm_rows)"
		if !errors.Is(cerr, federation.ErrSiteRefused) || !strings.Contains(cerr.Error(), refused) {
			t.Errorf("%s: coordinator: %v, want ErrSiteRefused: %s", step.name, cerr, refused)
		}
		if !errors.Is(errs[1], federation.ErrRefused) {
			t.Errorf("%s: site2: %v, want the run aborted (ErrRefused)", step.name, errs[1])
		}
		// The run stopped on the refusal, not on waiting: the round
		// timeout would have ended it with ErrSilent, not ErrSiteRefused.
		if got := sentAudit(t, site1, audited); got != "done:status,refusal.reason" {
			t.Errorf("%s: site1's crff_audit has sent %q for the refused run, want its refusal alone", step.name, got)
		}
		if !strings.Contains(logs.String(), fmt.Sprintf("name=site1 run=%s earlier_run=", step.run)) {
			t.Errorf("%s: no refusal logged with its keys:\n%s", step.name, logs.String())
		}
	}
	// Refused runs leave no record; site2, unchanged, took part in every run
	// that was not refused by site1 before it stopped.
	var got []string
	for _, s := range []*rowsSite{site1, site2} {
		raw, err := sql.Open("sqlite", s.path)
		if err != nil {
			t.Fatal(err)
		}
		var runs string
		err = raw.QueryRow(`SELECT group_concat(run, ',') FROM (SELECT DISTINCT run FROM crff_run_rows ORDER BY run)`).Scan(&runs)
		raw.Close()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, s.name+":"+runs)
	}
	if want := "site1:run-1,run-2,run-3 site2:run-1,run-2,run-3,run-4"; strings.Join(got, " ") != want {
		t.Errorf("crff_run_rows holds %s, want %s", strings.Join(got, " "), want)
	}
}

// lastAudit returns the id of the last crff_audit entry of s, 0 for none.
func lastAudit(t *testing.T, s *rowsSite) int64 {
	t.Helper()
	entries, err := s.db.ReadAudit(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		return 0
	}
	return entries[len(entries)-1].ID
}

// sentAudit lists what crff_audit of s records as sent after the entry
// after: per envelope, its kind and tensor names
// ("done:status,refusal.reason"), separated by spaces.
func sentAudit(t *testing.T, s *rowsSite, after int64) string {
	t.Helper()
	entries, err := s.db.ReadAudit(context.Background(), after, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.Direction != store.Sent {
			continue
		}
		var names []string
		for _, ts := range e.Tensors {
			names = append(names, ts.Name)
		}
		out = append(out, e.Kind+":"+strings.Join(names, ","))
	}
	return strings.Join(out, " ")
}

// TestRejoiningSiteWithRowsEditedInPlaceIsRefused: a site restarted mid-run
// rejoins it with the run's id; its rows must be exactly those it began
// the run with, even when as many rows were edited in place as
// min_arm_rows allows between runs, which a row count does not show. The
// refusal matches federation.ErrRowsChanged, so the site tells the
// coordinator why.
func TestRejoiningSiteWithRowsEditedInPlaceIsRefused(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	s := newRowsSite(t, "site1", 30, 1)
	join := func() error {
		t.Helper()
		recs, err := s.db.ReadRecords(ctx, s.src)
		if err != nil {
			t.Fatal(err)
		}
		return joinRun(log, s.db, s.name, func() *store.Records { return recs }, federation.DefaultMinArmRows)(ctx, "run-1")
	}
	if err := join(); err != nil {
		t.Fatalf("first join: %v", err)
	}
	if err := join(); err != nil {
		t.Fatalf("rejoin with the same rows: %v", err)
	}
	s.exec(t, `UPDATE records SET y = y + 1 WHERE id <= ?`, federation.DefaultMinArmRows)
	err := join()
	if !errors.Is(err, federation.ErrRowsChanged) || !errors.Is(err, store.ErrRunRowsChanged) ||
		!strings.Contains(err.Error(), "site1: its rows differ from those it began run run-1 with by 5 (added 0, deleted 0, edited 5)") {
		t.Fatalf("rejoin after edits in place: %v, want ErrRowsChanged naming the site, the run and the counts", err)
	}
	if !strings.Contains(logs.String(), "the site's rows changed since it began the run") {
		t.Errorf("refusal not logged:\n%s", logs.String())
	}
}

// TestRunKernels: a run's kernels are the site's by their labels; a
// kernel the site lacks, or has not installed, is named in the error.
func TestRunKernels(t *testing.T) {
	if _, err := runKernel([]modelstore.Kernel{{Name: "gaussian"}}, "laplacian"); err == nil || !strings.Contains(err.Error(), `kernel "laplacian"`) {
		t.Errorf("a kernel the site lacks: %v", err)
	}
	open := installedKernels(map[string]estimator.Spectral{"gaussian": estimator.GaussianSpectral{}, "laplacian": estimator.GaussianSpectral{}})
	if _, err := open(context.Background(), "matern(nu=0.5)"); err == nil || !strings.Contains(err.Error(), "this site has gaussian, laplacian") {
		t.Errorf("a kernel not installed: %v", err)
	}
}

// TestPrivateSiteNeedsBoundsAtStart: a private site refuses to start
// unless privacy.bounds gives a range for every continuous covariate and
// the outcome (matched whatever the case, as SQLite's names are), naming
// every one it lacks; privacy.exact: [row_count, moments] with a psi_clip
// needs none, nor does [row_count, moments, ate]. A bound of a column the
// table lacks is logged.
func TestPrivateSiteNeedsBoundsAtStart(t *testing.T) {
	s := newRowsSite(t, "site1", 20, 1)
	recs, err := s.db.ReadRecords(context.Background(), s.src)
	if err != nil {
		t.Fatal(err)
	}
	b := func(lo, hi float64) federation.Bound { return federation.Bound{Lo: lo, Hi: hi} }
	for _, tc := range []struct {
		name    string
		p       federation.SitePrivacy
		err     string
		outcome *federation.Bound // the outcome's bound taken
		logged  string
	}{
		{"none", federation.SitePrivacy{}, "no public bound (privacy.bounds) for x1, x2, the outcome", nil, ""},
		{"x1 alone", federation.SitePrivacy{Bounds: map[string]federation.Bound{"x1": b(-5, 5)}}, "for x2, the outcome: ", nil, ""},
		{"covariates alone", federation.SitePrivacy{Bounds: map[string]federation.Bound{"x1": b(-5, 5), "x2": b(-5, 5)}}, "(the outcome is column y)", nil, ""},
		{"every column, another case", federation.SitePrivacy{Bounds: map[string]federation.Bound{"X1": b(-5, 5), "x2": b(-5, 5), "Y": b(-4, 6)}}, "", &federation.Bound{Lo: -4, Hi: 6}, ""},
		{"a column the table lacks", federation.SitePrivacy{Bounds: map[string]federation.Bound{"x1": b(-5, 5), "x2": b(-5, 5), "y": b(-3, 6), "agee": b(0, 1)}},
			"", &federation.Bound{Lo: -3, Hi: 6}, "column=agee"},
		{"moments exact, the outcome still bounded", federation.SitePrivacy{Exact: []string{federation.ExactRowCount, federation.ExactMoments}, PsiClip: 8,
			Bounds: map[string]federation.Bound{"y": b(-4, 6)}}, "", &federation.Bound{Lo: -4, Hi: 6}, ""},
		{"moments exact, no outcome bound", federation.SitePrivacy{Exact: []string{federation.ExactRowCount, federation.ExactMoments}, PsiClip: 8}, "", nil, ""},
		{"moments and ate exact", federation.SitePrivacy{Exact: []string{federation.ExactRowCount, federation.ExactMoments, federation.ExactATE}}, "", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			p := tc.p
			err := privateColumns(log, &p, s.src, recs)
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("%v, want none", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("%v, want an error saying %q", err, tc.err)
			}
			if (p.Outcome == nil) != (tc.outcome == nil) || tc.outcome != nil && *p.Outcome != *tc.outcome {
				t.Errorf("outcome bound %v, want %v", p.Outcome, tc.outcome)
			}
			if tc.logged != "" && !strings.Contains(logs.String(), tc.logged) {
				t.Errorf("log %q does not name %q", logs.String(), tc.logged)
			}
		})
	}
	if err := privateColumns(slog.New(slog.DiscardHandler), nil, s.src, recs); err != nil {
		t.Errorf("a site without privacy: %v", err)
	}
}

// TestFederatedSiteWarnsOfUnusedColumns checks that a federated site, too, logs
// the columns it left out of the covariates it chose.
func TestFederatedSiteWarnsOfUnusedColumns(t *testing.T) {
	s := newRowsSite(t, "a", 20, 1)
	s.exec(t, `ALTER TABLE records ADD COLUMN name TEXT`)
	s.exec(t, `UPDATE records SET name = 'patient ' || id`)
	s.src.Covariates = nil
	var logs bytes.Buffer
	f := &federated{cfg: Config{DB: s.db, Source: s.src}, f: &Federation{}, log: slog.New(slog.NewTextHandler(&logs, nil))}
	recs, _, err := f.read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(recs.Layout.Covariates, " "); got != "x1 x2" {
		t.Errorf("covariates %q, want x1 x2", got)
	}
	if want := `level=WARN msg="column not used as a covariate (list site.covariates to choose them)" db=` + s.path +
		` column=name reason="none of its 20 values is a number"`; !strings.Contains(logs.String(), want) {
		t.Errorf("log lacks\n%s\nin\n%s", want, logs.String())
	}
}
