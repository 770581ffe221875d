package report_test

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/report"
)

func TestCoordinator(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "coordinator.sqlite")
	db, err := federation.OpenStateDB(ctx, path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Finish(ctx, &federation.Result{RunID: "run-0", GlobalATE: 4.1, GlobalSE: 0.2, Rows: []int{100, 200}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Finish(ctx, &federation.Result{RunID: "run-00", GlobalATE: 3.9, GlobalSE: math.NaN(), Rows: []int{100, 200}}); err != nil {
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

	var b bytes.Buffer
	if err := report.Coordinator(ctx, path, &b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	checkPage(t, page, 1)
	for _, want := range []string{
		"<code>run-0</code>", "[3.7080, 4.4920]", "<td>unknown</td>",
		"Run <code>run-1</code>, step 42", `<td class="l">b</td><td>120</td><td>3</td>`,
		"30 rounds, final loss 12.5",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
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
