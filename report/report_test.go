package report_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/report"
	"github.com/crffd/crffd/store"
)

// syntheticSite writes a small site file with made-up results: 200 rows,
// a quarter of the treated with a propensity above 0.99, transfer factors
// to two peers, an audit log, and with withLoss a loss history and a model
// selection. It returns the open site.
func syntheticSite(t testing.TB, withLoss bool) *store.Site {
	t.Helper()
	ctx := context.Background()
	s := newSite(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 200
	rows := make([][]any, n)
	for i := range rows {
		rows[i] = []any{int64(i + 1), rng.NormFloat64(), int64(i % 2), rng.NormFloat64()}
	}
	cols := []store.Column{{Name: "id", Type: store.Integer}, {Name: "x", Type: store.Real},
		{Name: "w", Type: store.Integer}, {Name: "y", Type: store.Real}}
	if err := s.CreateTable(ctx, "visits", cols, rows, false); err != nil {
		t.Fatal(err)
	}
	recs, err := s.ReadRecords(ctx, store.Source{DB: s.Path(), Table: "visits", IDColumn: "id",
		TreatmentColumn: "w", OutcomeColumn: "y", OutcomeType: store.OutcomeContinuous})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.BeginRun(ctx, "run-1", recs.Layout); err != nil {
		t.Fatal(err)
	}
	res := store.Results{
		ATE: []store.ATE{
			{Scope: store.ScopeLocal, Estimator: store.EstimatorAIPW, ATE: 1.2, SE: 0.15, Lower: 0.906, Upper: 1.494, N: n, Clipped: 2},
			{Scope: store.ScopeLocal, Estimator: store.EstimatorPlugIn, ATE: 0.9, SE: math.NaN(), Lower: math.NaN(), Upper: math.NaN(), N: n, Clipped: -1},
		},
		Transfer: []store.Transfer{
			{Peer: "hospital-b", Model: "outcome", Lambda: 0.8}, {Peer: "hospital-c", Model: "outcome", Lambda: 0.1},
			{Peer: "hospital-b", Model: "propensity", Lambda: 0.6}, {Peer: "hospital-c", Model: "propensity", Lambda: 0.3},
		},
	}
	if withLoss { // and a model selection
		res.Selection = []store.Selection{
			{Candidate: "latent/gaussian", Kind: "latent", Kernel: "gaussian", Loss: 8.5, SE: 1.2, N: 40},
			{Candidate: "tlearner/10", Kind: "tlearner", Ridge: 10, Loss: 8.1, SE: 1.1, Diff: -0.4, DiffSE: 0.15, Member: true, N: 40},
			{Candidate: "ensemble", Kind: "ensemble", Loss: 8.05, Diff: -0.45, Chosen: true, Shift: 0.25, N: 40},
		}
	}
	for i, id := range recs.IDs {
		c := 1.2 + 0.8*rng.NormFloat64()
		p := 0.35 + 0.3*rng.Float64()
		if i%2 == 1 { // treated
			p += 0.2
			if i%8 == 1 {
				p = 0.995
			}
		}
		res.CATE = append(res.CATE, store.CATE{RowID: id, CATE: c, SE: 0.3, Lower: c - 0.6, Upper: c + 0.6, Latent: c, LatentSD: 0.3, LatentQ025: c - 0.6, LatentQ975: c + 0.6,
			Y0: 0, Y1: c, Propensity: p})
	}
	if err := s.WriteResults(ctx, "run-1", res); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteATE(ctx, "run-1", store.ATE{Scope: store.ScopeGlobal, Estimator: store.EstimatorAIPW, ATE: 1.0, SE: 0.08, Lower: 0.8432, Upper: 1.1568, N: 3 * n}); err != nil {
		t.Fatal(err)
	}
	if withLoss {
		for r := range 40 {
			if err := s.AppendLoss(ctx, "run-1",
				store.Loss{Model: "outcome", Round: r, Loss: 100 * math.Exp(-float64(r)/8)},
				store.Loss{Model: "propensity", Round: r, Loss: 60 * math.Exp(-float64(r)/5)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, e := range []store.AuditEntry{
		{Direction: store.Received, Peer: "coordinator", Kind: "hello", Run: "run-1", Bytes: 120},
		{Direction: store.Sent, Peer: "coordinator", Kind: "gradient", Run: "run-1", Model: "outcome", Round: 1, Bytes: 4096},
		{Direction: store.Sent, Peer: "coordinator", Kind: "gradient", Run: "run-1", Model: "outcome", Round: 2, Bytes: 4096},
		{Direction: store.Received, Peer: "coordinator", Kind: "weights", Run: "run-1", Model: "outcome", Round: 2, Bytes: 8192},
	} {
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

var dataURI = regexp.MustCompile(`src="data:image/png;base64,([A-Za-z0-9+/=]+)"`)

// checkPage checks that page is self-contained and that its images are
// PNGs of the expected count, and returns them decoded.
func checkPage(t *testing.T, page string, images int) {
	t.Helper()
	for _, bad := range []string{"http://", "https://", "<script", "<link"} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q: it must load nothing", bad)
		}
	}
	ms := dataURI.FindAllStringSubmatch(page, -1)
	if len(ms) != images {
		t.Errorf("page embeds %d images, want %d", len(ms), images)
	}
	for i, m := range ms {
		b, err := base64.StdEncoding.DecodeString(m[1])
		if err != nil {
			t.Fatalf("image %d: %v", i, err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("image %d: %v", i, err)
		}
		if r := img.Bounds(); r.Dx() < 300 || r.Dy() < 150 {
			t.Errorf("image %d is %v", i, r)
		}
	}
}

func TestSite(t *testing.T) {
	s := syntheticSite(t, true)
	var b bytes.Buffer
	if err := report.Site(context.Background(), s, &b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	checkPage(t, page, 4)
	for _, want := range []string{
		"run <code>run-1</code>",
		`<td class="l">local</td><td class="l">aipw</td><td>1.2000</td><td>0.1500</td><td>[0.9060, 1.4940]</td><td>200</td><td>2</td>`,
		`<td class="l">local</td><td class="l">plugin</td><td>0.9000</td><td>none</td><td>none</td><td>200</td><td>-</td>`,
		`<td class="l">global</td><td class="l">aipw</td><td>1.0000</td><td>0.0800</td><td>[0.8432, 1.1568]</td>`,
		"Positivity warning:</strong> 25 of 200 rows (12.5%) have a propensity outside [0.01, 0.99], above the 5% limit.",
		"Outside [0.01, 0.99]: 25 treated and 0 control rows.",
		`<td class="l">sent</td><td class="l">gradient</td><td>1</td><td>2</td><td>8.0 KiB (8192 B)</td>`,
		`<th class="l">received</th><th class="l">all</th><th>1</th><th>2</th><th>8.1 KiB (8312 B)</th>`,
		`<tr class="extreme"><td class="l">[0.99, 1]</td><td>25</td><td>0</td>`,
		`<td class="l">latent/gaussian</td><td>8.5 ± 1.2</td><td>&#43;0 ± 0</td><td class="l"></td>`,
		`<td class="l">tlearner/10</td><td>8.1 ± 1.1</td><td>-0.4 ± 0.15</td><td class="l">member</td>`,
		`<td class="l">ensemble</td><td>8.05</td><td>-0.45</td><td class="l">chosen: the members&#39; mean, shifted by &#43;0.25</td>`,
		"on the 40 rows held out of training",
		"The run's optimiser was not recorded.", // the synthetic site saved no setup
		// What λ is, and what it is not.
		"<h2>Transfer factors λ: how much this site's models borrow from each peer (not site similarity)</h2>",
		"λ<sub>ij</sub> is how much site i's model borrows from site j's parameters in training",
		"It is learned separately for each model (propensity, outcome, latent)",
		"It is not a measure of how alike two sites are: on the paper's synthetic design of five sites, the outcome and latent models' λ settled near 0.4",
		`alt="λ: how much this site&#39;s models borrow from each peer&#39;s parameters: 2 by 2 transfer factors"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if dir := os.Getenv("CRFFD_REPORT_OUT"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "site-report.html"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSitePrivacy: the page lists the latest run's charges, the
// aggregates it released exactly and with noise, and the budget; a global
// ATE of noised sums shows the part of its se the noise accounts for.
// Without charges it says the site sent nothing noised.
func TestSitePrivacy(t *testing.T) {
	ctx := context.Background()
	s := syntheticSite(t, false)
	var b bytes.Buffer
	if err := report.Site(ctx, s, &b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "No privacy charge recorded") {
		t.Error("a site without charges: no note")
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, c := range []store.PrivacyCharge{
		{Run: "run-0", Step: "training latent", Rounds: 10, Steps: 10, Q: 1, Noise: 3, Epsilon: 0.5, Total: 0.5},
		{Run: "run-1", Step: "training latent", Rounds: 10, Steps: 10, Q: 0.25, Noise: 2.5, Epsilon: 0.6, Total: 0.9},
		{Run: "run-1", Step: "moments", Rounds: 1, Steps: 1, Q: 1, Noise: 7, Epsilon: 0.1, Total: 1},
		{Run: "run-1", Step: "ate", Rounds: 1, Steps: 3, Q: 1, Noise: 7, Epsilon: 0.2, Total: 1.25},
	} {
		c.At, c.Clip, c.Delta, c.Budget, c.Relation = at, 1, 1e-5, 8, "add/remove, row count public"
		c.Exact = []string{"balance", "row_count"}
		if err := s.AppendPrivacyCharge(ctx, c); err != nil {
			t.Fatalf("charge %d: %v", i, err)
		}
	}
	if err := s.WriteATE(ctx, "run-1", store.ATE{Scope: store.ScopeGlobal, Estimator: store.EstimatorAIPW, ATE: 1, SE: 0.5, Lower: 0.02, Upper: 1.98,
		N: 600, Clipped: 0, Private: true, NoiseSE: 0.3}); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := report.Site(ctx, s, &b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		"the charges of run <code>run-1</code>",
		"spends ε = 1.25 at δ = 1e-05 of a budget of 8; 6.75 is left",
		"add/remove, row count public",
		`<td class="l">training latent</td><td>0.6</td><td>10</td><td>0.25</td><td>2.5</td>`,
		`<td class="l">ate</td><td>0.2</td><td>3</td><td>1</td><td>7</td>`,
		"Released exactly, outside the guarantee (privacy.exact):</strong> balance, row_count.",
		"Released with noise:</strong> the training rounds, moments, ate.",
		`<td class="l">global</td><td class="l">aipw</td><td>1.0000</td><td>0.5000</td><td>[0.0200, 1.9800]</td><td>600</td><td>0</td><td>0.3000</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, `<td>3</td><td>1</td><td>0.5</td>`) {
		t.Error("page lists a charge of an earlier run")
	}
}

func TestSiteWithoutLoss(t *testing.T) {
	s := syntheticSite(t, false)
	var b bytes.Buffer
	if err := report.Site(context.Background(), s, &b); err != nil {
		t.Fatal(err)
	}
	checkPage(t, b.String(), 3)
	if !strings.Contains(b.String(), "No model selection in this run") {
		t.Error("page lacks the note that the run had no model selection")
	}
	if !strings.Contains(b.String(), "No loss history recorded") {
		t.Error("page lacks the note on the missing loss history")
	}
}

func TestSiteWithoutResults(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, filepath.Join(t.TempDir(), "empty.sqlite"), store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var b bytes.Buffer
	if err := report.Site(ctx, s, &b); err != nil {
		t.Fatal(err)
	}
	checkPage(t, b.String(), 0)
	for _, want := range []string{"No results have been written", "The audit log is empty"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// verdictSite writes a site file with treated and control rows, the first
// outside of them (treated first) with a propensity of 0.995 and the others
// 0.9, and returns it open.
func verdictSite(t *testing.T, treated, control, outside int) *store.Site {
	t.Helper()
	s := newSite(t)
	ps := make([]float64, treated+control)
	for i := range ps {
		ps[i] = 0.9
		if i < outside {
			ps[i] = 0.995
		}
	}
	report.WritePropensitySite(t, s, ps, treated)
	return s
}

// TestSitePositivityVerdict checks that the overlap section's verdict
// follows the rules of package positivity, arm counts included: green only
// when every rule holds and no propensity is extreme, grey when a few are
// within the limit, red otherwise, such as with 1 control row among 300
// whose propensities all lie within the bounds (issue 13).
func TestSitePositivityVerdict(t *testing.T) {
	tests := []struct {
		name                      string
		treated, control, outside int
		class                     string // of the verdict's paragraph: ok, note or warn
		want                      string
	}{
		{"balanced", 100, 100, 0, "ok",
			"Every scored row has a propensity within [0.01, 0.99], and each arm holds enough rows (100 treated, 100 control)."},
		{"few extremes within the limit", 100, 100, 2, "note",
			"2 of 200 scored rows (1.0%) have a propensity outside [0.01, 0.99] (2 treated, 0 control): within the limit"},
		{"one control row", 299, 1, 0, "warn",
			"Positivity warning:</strong> 1 control row (w = 0) among 300 (0.3%), below the 20 rows and 5% of the rows each arm should hold."},
		{"thin arm, propensities within the bounds", 290, 10, 0, "warn",
			"10 control rows (w = 0) among 300 (3.3%), below the 20 rows and 5% of the rows each arm should hold."},
		{"too many extremes", 100, 100, 11, "warn",
			"11 of 200 rows (5.5%) have a propensity outside [0.01, 0.99], above the 5% limit."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := report.Site(context.Background(), verdictSite(t, tt.treated, tt.control, tt.outside), &b); err != nil {
				t.Fatal(err)
			}
			page := b.String()
			section := page[strings.Index(page, "<h2>Propensity overlap"):strings.Index(page, "<h2>Is the heterogeneity real")]
			for _, class := range []string{"ok", "note", "warn"} {
				has := strings.Contains(section, `<p class="`+class+`">`)
				if has != (class == tt.class) {
					t.Errorf("verdict paragraph of class %q: %v, want only %q", class, has, tt.class)
				}
			}
			if !strings.Contains(section, tt.want) {
				t.Errorf("overlap section lacks %q:\n%s", tt.want, section)
			}
			if !strings.Contains(section, "below 5 rows in an arm, crffd fit refuses to train") {
				t.Error("the section does not state the rules")
			}
		})
	}
}

// TestSitePositivityWithoutArms checks that scored rows none of which has a
// treatment of 0 or 1 in the table are not called overlapping.
func TestSitePositivityWithoutArms(t *testing.T) {
	s := verdictSite(t, 100, 100, 0)
	db, err := sql.Open("sqlite", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE visits SET w = NULL`); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := report.Site(context.Background(), s, &b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	section := page[strings.Index(page, "<h2>Propensity overlap"):strings.Index(page, "<h2>Is the heterogeneity real")]
	if strings.Contains(section, `class="ok"`) || !strings.Contains(section, "No scored row has a treatment of 0 or 1 in the table.") {
		t.Errorf("overlap section:\n%s", section)
	}
}

// newSite creates an empty site file, open until the test ends.
func newSite(t testing.TB) *store.Site {
	t.Helper()
	s, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "site.sqlite"), store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestSiteSubgroups: the page draws a forest plot of the subgroups with
// figures and lists every subgroup, with the reason of those without.
func TestSiteSubgroups(t *testing.T) {
	s := syntheticSite(t, true)
	db, err := sql.Open("sqlite", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO crff_gate (scope, subgroup, n, treated, control, estimate, se, lower, upper, plugin, reason, run, computed_at) VALUES
		('local', 'over 65', 120, 50, 70, 1.5, 0.25, 1.01, 1.99, 1.2, NULL, 'run-1', '2026-11-28T00:00:00Z'),
		('local', 'women', 90, 40, 50, -0.25, 0.3, -0.838, 0.338, 0.1, NULL, 'run-1', '2026-11-28T00:00:00Z'),
		('local', 'tiny', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'small cell: fewer than 5 rows in an arm (federation.min_arm_rows)', 'run-1', '2026-11-28T00:00:00Z')`); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := report.Site(context.Background(), s, &b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	checkPage(t, page, 5)
	for _, want := range []string{
		`<td class="l">local</td><td class="l">over 65</td><td>120 (50 treated)</td><td>1.5 ± 0.25</td><td>[1.01, 1.99]</td><td>1.2</td><td class="l"></td>`,
		`<td class="l">local</td><td class="l">tiny</td><td>-</td><td>-</td><td>-</td><td>-</td><td class="l">small cell: fewer than 5 rows in an arm (federation.min_arm_rows)</td>`,
		`alt="Forest plot of 2 group effects; the first, over 65, is 1.5 with 95% interval [1.01, 1.99]."`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Without subgroups the section says how to name them.
	if _, err := db.Exec(`DELETE FROM crff_gate`); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := report.Site(context.Background(), s, &b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "No subgroups: name them in crff_subgroup") {
		t.Error("the page without subgroups does not say how to name them")
	}
}

// TestSiteHeterogeneity: the page shows the heterogeneity statistics, the
// GATES as a forest plot, the TOC curve, the CLAN table and the policies.
func TestSiteHeterogeneity(t *testing.T) {
	s := syntheticSite(t, true)
	db, err := sql.Open("sqlite", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const at = `'run-1', '2026-11-28T00:00:00Z'`
	ins := `INSERT INTO crff_heterogeneity (scope, statistic, estimate, se, lower, upper, p_value, n, run, computed_at) VALUES
		('local', 'blp_het', 0.9, 0.2, 0.508, 1.292, 0.00001, 200, ` + at + `),
		('global', 'blp_het', 1.1, 0.1, 0.904, 1.296, 0, 600, ` + at + `)`
	for k := 1; k <= 5; k++ {
		ins += fmt.Sprintf(`, ('local', 'gates_%d', %d, 0.5, %v, %v, NULL, 40, %s)`, k, k, float64(k)-0.98, float64(k)+0.98, at)
	}
	for q := 10; q <= 90; q += 10 {
		ins += fmt.Sprintf(`, ('local', 'toc_%d', %v, 0.1, %v, %v, NULL, 200, %s)`, q, 1-float64(q)/100, 0.8-float64(q)/100, 1.2-float64(q)/100, at)
	}
	if _, err := db.Exec(ins); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO crff_clan VALUES ('local', 'age', 60, 1, 40, 1, 20, 1.4, 17.26, 22.74, 40, 40, ` + at + `);
		INSERT INTO crff_policy VALUES ('local', 'cate_lower_above_0', 0.4, 3, 0.2, 2.6, 3.4, 0.5, 0.1, 0.3, 0.7, -0.2, 0.1, -0.4, 0, 200, ` + at + `)`); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := report.Site(context.Background(), s, &b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	checkPage(t, page, 6) // the site's four, the GATES and the TOC
	for _, want := range []string{
		`<td class="l">blp_het</td><td>0.9 ± 0.2</td><td>[0.508, 1.292]</td><td class="l">p = 1e-05</td>`,
		`<td class="l">blp_het (all sites)</td><td>1.1 ± 0.1</td><td>[0.904, 1.296]</td><td class="l">p = 0</td>`,
		`alt="Forest plot of 5 group effects; the first, gates_1, is 1 with 95% interval [0.02, 1.98]."`,
		`alt="TOC curve at 9 shares; at q = 0.1 it is 0.9."`,
		`<td class="l">age</td><td>60 − 40 = 20</td><td>[17.26, 22.74]</td>`,
		`<td class="l">cate_lower_above_0</td><td>3 ± 0.2</td><td>[2.6, 3.4]</td><td class="l">treats 40%; gain over none 0.5 [0.3, 0.7], over all -0.2 [-0.4, 0]</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
