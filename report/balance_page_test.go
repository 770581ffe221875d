package report_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/crffd/crffd/balance"
	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/report"
	"github.com/crffd/crffd/store"
)

// TestSiteReportShowsBalance checks the balance section of the site
// report: a section per scope with its verdict, love plot and table, and a
// note when the file holds none.
func TestSiteReportShowsBalance(t *testing.T) {
	ctx := context.Background()
	s := newSite(t)
	var empty bytes.Buffer
	if err := report.Site(ctx, s, &empty); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(empty.String(), "No balance diagnostics in this file: run crffd check") {
		t.Error("a file without balance diagnostics does not say so")
	}
	local := report.ImbalancedBalance()
	local.Report.Rows = [2]int{480, 520}
	local.Report.ESS = [2]float64{400, 410}
	local.Report.Verdict, local.Report.Advice = balance.Good, "nothing to do"
	local.Missing = []int{0, 3, 0, 0}
	global := local
	global.Scope, global.Run, global.Sites, global.LeftOut = store.ScopeGlobal, "run-7", 3, -1
	global.Missing = nil
	global.Report.Verdict, global.Report.Reasons, global.Report.Advice = balance.Poor, []string{"12 control rows"}, "restrict the rows"
	for _, b := range []store.Balance{local, global} {
		if err := s.WriteBalance(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := report.Site(ctx, s, &buf); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	checkPage(t, page, 2)
	for _, want := range []string{
		"<h3>This site&#39;s rows</h3>", `<p class="ok"><strong>Overlap: good.</strong> What to do: nothing to do.</p>`,
		"<h3>Every site&#39;s rows (run run-7)</h3>", `<p class="warn"><strong>Overlap: poor.</strong> 12 control rows. What to do: restrict the rows.</p>`,
		`<tr class="extreme"><td>1</td><td class="l">severity</td><td class="l">continuous</td><td>3</td><td>&#43;1.100</td><td>&#43;0.030</td></tr>`,
		"at 3 sites",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// TestLossCaptionNamesTheOptimiser: the loss plot's caption speaks of a
// line search only for an L-BFGS run.
func TestLossCaptionNamesTheOptimiser(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		method        estimator.Method
		batch         int
		want, without string
	}{
		{estimator.LBFGS, 256, "The optimiser was L-BFGS: a round is one evaluation of the objective on every row, and a spike is a trial step of its line search", "Adam"},
		{estimator.Adam, 256, "The optimiser was Adam, which has no line search: a round is one step, computed on a random batch of up to 256 rows", "spike"},
		{estimator.Adam, 0, "The optimiser was Adam, which has no line search: a round is one step, computed on every row", "batch"},
	} {
		s := syntheticSite(t, true)
		cfg := estimator.DefaultConfig()
		cfg.Method, cfg.BatchSize = tc.method, tc.batch
		js, err := json.Marshal(modelstore.Setup{Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SaveSetup(ctx, "run-1", js); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := report.Site(ctx, s, &b); err != nil {
			t.Fatal(err)
		}
		page := b.String()
		i := strings.Index(page, "The loss J<sup>(s)</sup>")
		if i < 0 {
			t.Fatalf("%v, batch %d: no loss caption", tc.method, tc.batch)
		}
		caption := page[i : i+strings.Index(page[i:], "</p>")]
		if !strings.Contains(caption, tc.want) || strings.Contains(caption, tc.without) {
			t.Errorf("%v, batch %d: caption %q, want %q and no %q", tc.method, tc.batch, caption, tc.want, tc.without)
		}
	}
}
