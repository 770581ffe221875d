package pipeline

import (
	"context"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/internal/mapped"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/selection"
	"github.com/crffd/crffd/store"
)

// TestSolveCosts: the two fits' walls, made from known costs, give those
// costs back; noise that would make one negative leaves it at zero and
// fits the other to the larger fit.
func TestSolveCosts(t *testing.T) {
	const round, row = 20.0, 5e5 // ns per round-row, ns per row
	wall := func(units float64, rows int) time.Duration {
		return time.Duration(round*units + row*float64(rows))
	}
	many := &sampleFit{rows: 10000, units: 30 * 23 * 4096}
	few := &sampleFit{rows: 20000, units: 4 * 23 * 4096}
	many.wall, few.wall = wall(many.units, many.rows), wall(few.units, few.rows)
	gotRound, gotRow := solveCosts(many, few)
	if math.Abs(gotRound-round) > 1e-6*round || math.Abs(gotRow-row) > 1e-6*row {
		t.Errorf("costs %v, %v; want %v, %v", gotRound, gotRow, round, row)
	}
	for _, c := range []struct {
		name                string
		manyWall, fewWall   time.Duration
		wantRound, wantRows bool // which cost is positive
	}{
		{"rounds cost nothing", time.Duration(row * 10000), time.Duration(row * 20000), false, true},
		{"rows cost nothing", time.Duration(round * many.units), time.Duration(round * few.units), true, false},
		{"the smaller fit much faster", time.Millisecond, 10 * time.Second, false, true},
		{"the larger fit much faster", 10 * time.Second, time.Second, true, false},
	} {
		a, b := *many, *few
		a.wall, b.wall = c.manyWall, c.fewWall
		gr, gw := solveCosts(&a, &b)
		if gr < 0 || gw < 0 || (gr > 1e-9) != c.wantRound || (gw > 1e-9) != c.wantRows {
			t.Errorf("%s: costs %v, %v", c.name, gr, gw)
		}
		if pred := gr*b.units + gw*float64(b.rows); math.Abs(pred-float64(b.wall)) > 1e-6*float64(b.wall) {
			t.Errorf("%s: the larger fit predicted %v, took %v", c.name, time.Duration(pred), b.wall)
		}
	}
}

// TestMemory: the live heap of each phase grows from its larger measure
// by the median growth a row of the phases, never below the larger
// measure, and by the collector's headroom; the mapped rows add what of
// them is resident at once; the sizes it is measured at are larger than
// the sample, within the site.
func TestMemory(t *testing.T) {
	a := &sampleFit{rows: 1000, live: 10 << 20, other: 4 << 20}
	b := &sampleFit{rows: 2000, live: 12 << 20, other: 3 << 20}
	got := memory(a, b, 11000, 0)
	live := float64(12<<20) + 9000*float64(2<<20)/1000
	if want := uint64(2*live) + 4<<20; got != want { // GOGC=100 in tests
		t.Errorf("memory %d, want %d", got, want)
	}
	// A smaller heap at more rows is noise: no growth, not a fall.
	b.live = 8 << 20
	if got, want := memory(a, b, 11000, 0), uint64(2*float64(10<<20))+4<<20; got != want {
		t.Errorf("memory %d, want %d", got, want)
	}
	// Phase by phase: the training's workspaces dominate both fits, but
	// a later phase holds more and dominates at the site's size, grown
	// by the median of the phases' growths (1, 2 and 10 MiB per 1000
	// rows: 2), not by its own noisy 10.
	a = &sampleFit{rows: 1000, live: 20 << 20, phases: []uint64{20 << 20, 15 << 20, 14 << 20}, other: 1 << 20}
	b = &sampleFit{rows: 2000, live: 22 << 20, phases: []uint64{21 << 20, 17 << 20, 24 << 20}, other: 1 << 20}
	if got, want := memory(a, b, 11000, 0), uint64(2*float64((24+18)<<20))+1<<20; got != want {
		t.Errorf("memory by phase %d, want %d", got, want)
	}
	b.phases = b.phases[:1] // fits of different phases: the whole fit's line
	if got, want := memory(a, b, 11000, 0), uint64(2*float64((22+18)<<20))+1<<20; got != want {
		t.Errorf("memory of unlike phases %d, want %d", got, want)
	}
	// Mapped rows add what of them is resident at once.
	b.live, b.phases = 20<<20, []uint64{20 << 20, 15 << 20, 5 << 20}
	for _, c := range []struct{ mapped, want uint64 }{
		{0, 2 * 20 << 20},
		{3 << 20, 2*20<<20 + 3<<20},
		{3 << 30, 2*20<<20 + mappedResident},
	} {
		if got := memory(a, b, 11000, c.mapped); got != c.want+1<<20 {
			t.Errorf("memory with %d bytes mapped %d, want %d", c.mapped, got, c.want+1<<20)
		}
	}
	if got := mappedBytes(1000, 30); got != 0 {
		t.Errorf("a small site's %d bytes mapped", got)
	}
	if got, want := mappedBytes(200000, 30), uint64(200000*(8*32+32)); runtime.GOOS == "linux" && got != want {
		t.Errorf("200 000 rows of 30: %d bytes mapped, want %d", got, want)
	}
	if got, want := mappedBytes(1000000, 30), uint64(1000000*(8*32+32)); runtime.GOOS == "linux" && got != want {
		t.Errorf("a million rows of 30: %d bytes mapped, want %d", got, want)
	}
	for _, c := range []struct{ m, n, small, large int }{
		{20000, 1000000, 40000, 80000},
		{20000, 50000, 40000, 50000},
		{20000, 20000, 10000, 20000},
		{3000, 3000, 1500, 3000},
	} {
		if s, l := memorySizes(c.m, c.n); s != c.small || l != c.large {
			t.Errorf("sample %d of %d: sizes %d, %d; want %d, %d", c.m, c.n, s, l, c.small, c.large)
		}
	}
}

// TestRepeatRows: the sample repeated keeps its rows' values, in turn,
// with ids of their own, in the heap or in mappings.
func TestRepeatRows(t *testing.T) {
	r := confounded(10)
	for _, inMappings := range []bool{false, true} {
		restore := mapped.Use(t.TempDir(), 1)
		got := repeatRows(r, 25, inMappings)
		restore()
		if got.Len() != 25 || got.Data.Rows() != 25 || len(got.XDigests) != 25 {
			t.Fatalf("%d rows", got.Len())
		}
		seen := map[store.RowID]bool{}
		for i := range 25 {
			if got.Data.Y[i] != r.Data.Y[i%10] || got.Data.W[i] != r.Data.W[i%10] || got.Data.X.At(i, 1) != r.Data.X.At(i%10, 1) || seen[got.IDs[i]] {
				t.Fatalf("row %d", i)
			}
			seen[got.IDs[i]] = true
		}
	}
	if repeatRows(r, 10, false) != r {
		t.Error("the sample at its own size was copied")
	}
}

// TestPlanFit: a plan of a sample of a tenth of a site counts the
// trainings the site's size takes, cross-fitted nuisances included, and
// predicts a time that is the sum of its steps.
func TestPlanFit(t *testing.T) {
	if testing.Short() {
		t.Skip("fits a sample four times")
	}
	cfg := estimator.DefaultConfig()
	cfg.Features, cfg.Latent, cfg.Rounds, cfg.Samples, cfg.BatchSize = 20, 3, 50, 10, 256
	recs := confounded(3000)
	recs.XDigests = make([]store.RowDigest, recs.Len())
	recs.Layout = store.Layout{Table: "t", ID: "id", Treatment: "w", Outcome: "y", Covariates: []string{"a", "b"}, Binary: []bool{false, false}}
	open := func(context.Context, modelstore.Kernel) (estimator.Spectral, error) {
		return estimator.GaussianSpectral{}, nil
	}
	in := PlanInput{Sample: &store.Sample{Records: recs, Rows: 30000, Stride: 10}, SampleRead: time.Second, OldRows: 30000, TempDir: t.TempDir(),
		Fit: SiteFit{DB: "site.sqlite", Config: cfg, Open: open,
			Choice: Selection{Kinds: []string{selection.KindLatent}, Kernels: []modelstore.Kernel{{Name: "gaussian"}}}}}
	p, err := PlanFit(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	// The site's 30 000 rows train each model for ⌈30000/256⌉ = 118
	// rounds, and each of the five folds' nuisances, on 24 000 rows, for
	// ⌈24000/256⌉ = 94.
	want := []PlannedTraining{{"latent", 118, 1}, {"outcome", 94, 5}, {"outcome", 118, 1}, {"propensity", 94, 5}, {"propensity", 118, 1}}
	if len(p.Trainings) != len(want) {
		t.Fatalf("trainings %v, want %v", p.Trainings, want)
	}
	for i, w := range want {
		if p.Trainings[i] != w {
			t.Errorf("training %d: %+v, want %+v", i, p.Trainings[i], w)
		}
	}
	var sum time.Duration
	for _, s := range p.Steps {
		if s.Time < 0 {
			t.Errorf("step %s: %v", s.Name, s.Time)
		}
		sum += s.Time
	}
	if p.Rows != 30000 || p.Sample != 3000 || sum != p.Time || p.Time <= 0 || p.Memory == 0 || p.RoundRows != 256 {
		t.Errorf("plan %+v", p)
	}
	var b strings.Builder
	if err := p.WriteText(&b, "site.sqlite"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"plan for site.sqlite: 30000 rows", "latent 1 × 118 rounds", "expected time: ", "expected peak memory: "} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("plan text lacks %q:\n%s", s, b.String())
		}
	}
	if _, err := PlanFit(context.Background(), PlanInput{Fit: in.Fit}); err == nil {
		t.Error("a plan without a sample was made")
	}
}
