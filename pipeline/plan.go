package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crffd/crffd/balance"
	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/records"
	"github.com/crffd/crffd/store"
)

// PlanInput configures PlanFit.
type PlanInput struct {
	// Fit is the fit to plan, as FitSite would run it; its Records are
	// ignored, and its Progress, Logger and Phases are not used.
	Fit SiteFit
	// Sample holds every Stride-th row of the site (store.SampleRecords).
	Sample *store.Sample
	// SampleRead is how long reading the sample took.
	SampleRead time.Duration
	// OldRows are the current run's CATEs, which the fit's write deletes.
	OldRows int
	// TempDir is where a scratch site file times the write; "" is
	// os.TempDir(). The site file itself is never written.
	TempDir string
	Logger  *slog.Logger // nil: nothing logged
}

// Plan is a fit's cost, predicted before it runs from short fits of a
// sample of its rows (PlanFit).
type Plan struct {
	Rows   int // the site's rows
	Sample int // the rows the cost was measured on
	// Trainings are the models the fit trains, cross-fitted nuisances
	// included, grouped by model and rounds.
	Trainings []PlannedTraining
	Steps     []PlannedStep // the predicted time of each step
	Time      time.Duration // the sum of Steps
	// Memory is the predicted peak of the memory the process holds from
	// the system (about its peak resident size; see memory). It is the
	// rougher figure (docs/benchmarks.md).
	Memory uint64
	// RoundCost is the measured wall time of a training round on
	// RoundRows rows (a batch), and RowCost of one row's other work
	// (scoring, the selection's statistics, the nuisances' predictions,
	// the AIPW).
	RoundCost, RowCost time.Duration
	RoundRows          int
	Measured           time.Duration // how long measuring took
}

// PlannedTraining is a group of the trainings a fit runs: Count models of
// kind Model of Rounds rounds each.
type PlannedTraining struct {
	Model  string
	Rounds int
	Count  int
}

// PlannedStep is one step's predicted time.
type PlannedStep struct {
	Name string
	Time time.Duration
}

// The two timed sample fits: the whole sample with few rounds, and half
// of it with more, so that rounds and rows are told apart.
const (
	planRoundsFew  = 4
	planRoundsMany = 30
	// planGCPercent is the collector's setting while the live heap is
	// measured: a collection every 10% of growth.
	planGCPercent = 10
	// PlanSampleRows is about how many rows a plan measures on.
	PlanSampleRows = 20000
)

// sampleFit is what one timed sample fit measured.
type sampleFit struct {
	rows      int
	wall      time.Duration
	units     float64 // Σ over trainings of rounds × rows a round computes
	trainings []estimator.Training
	live      uint64   // the largest live heap a collection found
	phases    []uint64 // the largest live heap between one training's end and the next's
	other     uint64   // the most memory outside the heap
	run       Run
}

// PlanFit predicts the time and peak memory of fitting the site in.Sample
// was drawn from, with in.Fit's settings. It fits the sample twice (all of
// it with few rounds, half of it with more rounds), solves the time of a
// training round and of a row's other work from the two, and scales them
// to the site's rows and the rounds the site's size takes (Config.RoundsFor);
// the read, the balance check and the write are timed on the sample and
// scaled by rows. The memory is extrapolated, in rows, from the largest
// live heap of two more fits of one round and one scoring sample, of the
// sample repeated to two and four times its rows, that collect garbage
// often.
func PlanFit(ctx context.Context, in PlanInput) (*Plan, error) {
	start := time.Now()
	s := in.Sample
	if s == nil || s.Records == nil || s.Data == nil || s.Rows == 0 {
		return nil, errors.New("plan: no sample of rows")
	}
	log := in.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	whole := s.Records
	half := everyOther(whole)
	log.Info("timing a fit of a sample of rows", slog.Int("rows", whole.Len()), slog.Int("of", s.Rows))
	many, err := fitSample(ctx, in.Fit, half, planRoundsMany, 0)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	few, err := fitSample(ctx, in.Fit, whole, planRoundsFew, 0)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	insert, del, err := timeWrite(ctx, in.TempDir, few.run)
	if err != nil {
		return nil, fmt.Errorf("plan: timing the write: %w", err)
	}
	// Their results would stay live through the memory's measure.
	many.run, few.run = Run{}, Run{}
	// The live heap is what a collection finds, and a short fit seldom
	// collects: two more fits, of one round and one scoring sample, collect
	// often to measure it, on the sample repeated to two larger sizes, so
	// that what grows with the rows stands out of the workspaces that do
	// not. They run after the timed ones, whose times they would slow.
	small, large := memorySizes(whole.Len(), s.Rows)
	tmp := cmp.Or(in.TempDir, os.TempDir())
	memSmall, err := memorySample(ctx, in.Fit, whole, small, s.Rows, tmp)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	memLarge, err := memorySample(ctx, in.Fit, whole, large, s.Rows, tmp)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	roundCost, rowCost := solveCosts(many, few)

	cfg := in.Fit.Config
	p := &Plan{Rows: s.Rows, Sample: whole.Len(), RowCost: dur(rowCost), RoundRows: batchRows(cfg, s.Rows)}
	p.RoundCost = dur(roundCost * float64(p.RoundRows))
	scale := float64(s.Rows) / float64(whole.Len())
	var units float64
	groups := map[PlannedTraining]int{}
	for _, t := range few.trainings {
		rows := int(math.Round(float64(t.Rows) * scale))
		r := cfg.RoundsFor(rows)
		units += float64(r) * float64(batchRows(cfg, rows))
		groups[PlannedTraining{Model: t.Model.String(), Rounds: r}]++
	}
	for g, n := range groups {
		g.Count = n
		p.Trainings = append(p.Trainings, g)
	}
	slices.SortFunc(p.Trainings, func(a, b PlannedTraining) int {
		return cmp.Or(cmp.Compare(a.Model, b.Model), cmp.Compare(a.Rounds, b.Rounds))
	})

	validate := float64(s.Validate)
	read := float64(in.SampleRead) - validate + validate*scale
	check, err := timeBalance(ctx, whole.Data)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	write := float64(insert)*scale + float64(del)*float64(in.OldRows)/float64(whole.Len())
	p.Steps = []PlannedStep{
		{"read", dur(read)},
		{"check", dur(float64(check) * scale)},
		{"training rounds", dur(roundCost * units)},
		{"scoring and statistics", dur(rowCost * float64(s.Rows))},
		{"write", dur(write)},
	}
	for _, st := range p.Steps {
		p.Time += st.Time
	}
	_, d := whole.Data.X.Dims()
	p.Memory = memory(memSmall, memLarge, s.Rows, mappedBytes(s.Rows, d))
	log.Debug("plan memory", slog.Int("small", memSmall.rows), slog.Any("small_live", memSmall.phases),
		slog.Int("large", memLarge.rows), slog.Any("large_live", memLarge.phases), slog.Uint64("other", max(memSmall.other, memLarge.other)))
	p.Measured = time.Since(start)
	return p, nil
}

func dur(seconds float64) time.Duration {
	return time.Duration(math.Round(max(seconds, 0)))
}

// batchRows is the rows one round of a model trained on rows rows
// computes on: the batch, or every row.
func batchRows(cfg estimator.Config, rows int) int {
	if cfg.Method == estimator.Adam && cfg.BatchSize > 0 {
		return min(rows, cfg.BatchSize)
	}
	return rows
}

// solveCosts solves wall = roundCost·units + rowCost·rows for the two
// fits, in nanoseconds. Noise can make one cost come out negative; it is
// then taken as zero and the other fitted alone to the larger fit.
func solveCosts(a, b *sampleFit) (roundCost, rowCost float64) {
	ta, tb := float64(a.wall), float64(b.wall)
	ra, rb := float64(a.rows), float64(b.rows)
	det := a.units*rb - b.units*ra
	if det != 0 {
		roundCost = (ta*rb - tb*ra) / det
		rowCost = (a.units*tb - b.units*ta) / det
	}
	switch {
	case det == 0 || roundCost < 0:
		return 0, tb / rb
	case rowCost < 0:
		return tb / b.units, 0
	}
	return roundCost, rowCost
}

// everyOther returns every other row of r, from the first.
func everyOther(r *store.Records) *store.Records {
	idx := make([]int, 0, (r.Len()+1)/2)
	for i := 0; i < r.Len(); i += 2 {
		idx = append(idx, i)
	}
	h := *r
	h.Data = r.Data.Subset(idx)
	h.IDs = make([]store.RowID, len(idx))
	h.XDigests = nil
	for k, i := range idx {
		h.IDs[k] = r.IDs[i]
	}
	if len(r.XDigests) == r.Len() {
		h.XDigests = make([]store.RowDigest, len(idx))
		for k, i := range idx {
			h.XDigests[k] = r.XDigests[i]
		}
	}
	return &h
}

// fitSample times FitSite on recs with rounds rounds per training, and
// records its trainings and the peak of its memory; with gcPercent > 0,
// under that collector setting (debug.SetGCPercent).
func fitSample(ctx context.Context, c SiteFit, recs *store.Records, rounds, gcPercent int) (*sampleFit, error) {
	c.Run, c.Records = "plan", recs
	c.Config.Rounds, c.Config.Epochs = rounds, 0
	c.Progress, c.Logger, c.Phases = nil, nil, nil
	out := &sampleFit{rows: recs.Len()}
	var mu sync.Mutex
	var phase atomic.Int64
	tctx := estimator.WithTrainings(ctx, func(t estimator.Training) {
		mu.Lock()
		out.trainings = append(out.trainings, t)
		mu.Unlock()
		phase.Add(1)
		if gcPercent > 0 {
			// The live heap is as the last collection found it: without
			// one now, the next phase would show the finished training's
			// workspaces as its own.
			runtime.GC()
		}
	})
	if gcPercent > 0 {
		defer debug.SetGCPercent(debug.SetGCPercent(gcPercent))
	}
	runtime.GC()
	stop := watchMemory(out, func() int { return int(phase.Load()) })
	start := time.Now()
	f, err := FitSite(tctx, c)
	out.wall = time.Since(start)
	stop()
	if err != nil {
		return nil, err
	}
	for _, t := range out.trainings {
		out.units += float64(t.Rounds) * float64(batchRows(c.Config, t.Rows))
	}
	out.run = f.Run
	return out, nil
}

// timeBalance times the balance check's propensity fit on d's rows.
func timeBalance(ctx context.Context, d *records.Data) (time.Duration, error) {
	start := time.Now()
	if _, err := balance.Of(ctx, d.X, d.W); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// timeWrite times writing r's CATEs to a scratch site file in dir, and
// deleting them again, as publishing writes the new run's and deletes the
// old run's.
func timeWrite(ctx context.Context, dir string, r Run) (insert, del time.Duration, err error) {
	if dir == "" {
		dir = os.TempDir()
	}
	scratch, err := os.MkdirTemp(dir, "crffd-plan-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(scratch)
	db, err := store.Open(ctx, filepath.Join(scratch, "scratch.sqlite"), store.Options{Create: true})
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	if err := db.BeginRun(ctx, r.ID, r.Records.Layout); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if _, err := writeRows(ctx, db, r); err != nil {
		return 0, 0, err
	}
	insert = time.Since(start)
	start = time.Now()
	if err := db.DiscardCATE(ctx, r.ID); err != nil {
		return 0, 0, err
	}
	return insert, time.Since(start), nil
}

// WriteText writes the plan for site file db.
func (p *Plan) WriteText(w io.Writer, db string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "plan for %s: %d rows (measured on %d of them in %s)\n", db, p.Rows, p.Sample, p.Measured.Round(100*time.Millisecond))
	parts := make([]string, len(p.Trainings))
	for i, t := range p.Trainings {
		parts[i] = fmt.Sprintf("%s %d × %d rounds", t.Model, t.Count, t.Rounds)
	}
	fmt.Fprintf(&b, "  trainings (cross-fitted nuisances included): %s\n", strings.Join(parts, ", "))
	parts = make([]string, len(p.Steps))
	for i, s := range p.Steps {
		parts[i] = fmt.Sprintf("%s %s", s.Name, s.Time.Round(time.Second))
	}
	fmt.Fprintf(&b, "  expected time: %s (%s)\n", p.Time.Round(time.Second), strings.Join(parts, ", "))
	fmt.Fprintf(&b, "  measured: a training round of %d rows %s, the other work of a row %s\n", p.RoundRows, p.RoundCost.Round(10*time.Microsecond), p.RowCost)
	fmt.Fprintf(&b, "  expected peak memory: %.2f GiB\n", float64(p.Memory)/(1<<30))
	_, err := io.WriteString(w, b.String())
	return err
}
