package report_test

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/report"
	"github.com/crffd/crffd/store/coordstore"
)

func TestCoordinator(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "coordinator.sqlite")
	db, err := coordstore.Open(ctx, path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Finish(ctx, &federation.Result{RunID: "run-0", GlobalATE: 4.25,
		GlobalAIPW: inference.Estimate{Estimate: 4.1, SE: 0.2, Lower: 3.708, Upper: 4.492, N: 300}, Rows: []int{100, 200},
		Sites: []string{"a", "c"}, Models: map[estimator.Kind]*estimator.Trained{
			estimator.Outcome: {Model: estimator.Outcome, Lambda: mat.NewSymDense(2, []float64{1, 0.4, 0.4, 1})}}}); err != nil {
		t.Fatal(err)
	}
	lambda := mat.NewSymDense(3, []float64{1, 0.8, 0.1, 0.8, 1, 0.2, 0.1, 0.2, 1})
	st := &federation.State{RunID: "run-1", Sites: []string{"a", "b", "c"}, Step: 42,
		Rows: []int{100, 120, 90}, Dropped: []int{0, 3, 0},
		Trained: []*estimator.Trained{{Model: estimator.Propensity, Lambda: lambda, Rounds: 30, Loss: 12.5}}}
	if err := db.Save(ctx, st); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// A run recorded before the AIPW estimate: its global_ate was the
	// plug-in ATE and its global_se not a standard error.
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO crff_coordinator_runs (run, finished_at, global_ate, global_se, rows)
		VALUES ('run-00', '2026-01-01T00:00:00.000Z', 3.9, 0.001, 300)`); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	var b bytes.Buffer
	if err := report.Coordinator(ctx, path, &b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	// The finished run's outcome Λ, and the running run's propensity Λ.
	checkPage(t, page, 2)
	for _, want := range []string{
		"<h2>Transfer factors λ of the latest finished run: how much each site's model borrows from each other site (not site similarity)</h2>",
		"Run <code>run-0</code>, one matrix per model. Row i, column j: λ<sub>ij</sub>; ones on the diagonal.", "<h3>outcome model</h3>",
		`alt="λ of the outcome model: how much site i&#39;s model borrows from site j: 2 by 2 transfer factors"`,
		"<h2>Transfer factors λ and loss of the models trained so far: how much each site's model borrows from each other site (not site similarity)</h2>",
		"<code>run-0</code>", `<td>4.1000</td><td>0.2000</td><td>[3.7080, 4.4920]</td><td>4.2500</td><td>300</td><td class="l">a, c</td>`,
		"<code>run-00</code>", `<td>none</td><td>none</td><td>none</td><td>3.9000</td><td>300</td><td class="l">all</td>`,
		"Run <code>run-1</code>, step 42", `<td class="l">b</td><td>120</td><td>3</td>`,
		"30 rounds, final loss 12.5",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Both matrices say what λ is, and what it is not.
	for _, want := range []string{
		"λ<sub>ij</sub> is how much site i's model borrows from site j's parameters in training",
		"It is learned separately for each model (propensity, outcome, latent)",
		"It is not a measure of how alike two sites are: on the paper's synthetic design of five sites, the outcome and latent models' λ settled near 0.4",
	} {
		if n := strings.Count(page, want); n != 2 {
			t.Errorf("page says %q %d times, want 2 (finished run, run in progress)", want, n)
		}
	}
	if dir := os.Getenv("CRFFD_REPORT_OUT"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "coordinator-report.html"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	if err := report.Coordinator(ctx, filepath.Join(t.TempDir(), "missing.sqlite"), &b); err == nil {
		t.Error("missing state file accepted")
	}
}
