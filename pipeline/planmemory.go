package pipeline

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/crffd/crffd/internal/mapped"
	"github.com/crffd/crffd/store"
)

// memory returns the peak memory at rows rows: the largest over the
// fits' phases (the spans between one training's end and the next's, the
// same in both fits) of the live heap on the line through the two fits'
// largest of that phase, never below the larger; grown by the collector's
// headroom (GOGC: the heap grows to (1+GOGC/100) times the live heap
// before a collection), plus the memory outside the heap. Phase by phase,
// because what dominates at the sample's size (the training's
// workspaces) is not what dominates at the site's (the rows' copies).
// mapped is the bytes of rows the site's read keeps outside the heap
// (store.Options.MapRows), which the samples held in it: they are taken
// out of the live heap before the headroom, and what of them is resident
// at once, at most mappedResident, is added.
func memory(a, b *sampleFit, rows int, mapped uint64) uint64 {
	lo, hi := a, b
	if lo.rows > hi.rows {
		lo, hi = hi, lo
	}
	line := func(l, h uint64) float64 {
		slope := 0.0
		if hi.rows > lo.rows && h > l {
			slope = float64(h-l) / float64(hi.rows-lo.rows)
		}
		return float64(h) + slope*float64(max(rows-hi.rows, 0))
	}
	live := line(lo.live, hi.live)
	if len(lo.phases) == len(hi.phases) {
		for p := range lo.phases {
			if lo.phases[p] > 0 && hi.phases[p] > 0 { // a phase too short to sample has none
				live = max(live, line(lo.phases[p], hi.phases[p]))
			}
		}
	}
	gc := debug.SetGCPercent(100)
	debug.SetGCPercent(gc)
	if gc < 0 {
		gc = 100
	}
	live = max(live-float64(mapped), 0)
	return uint64(live*(1+float64(gc)/100)) + min(mapped, mappedResident) + max(a.other, b.other)
}

// mappedResident is the most of the mapped rows resident at once: what a
// fit reads of them between two evictions (mapped.EvictEvery, 250 ms),
// at the 1 GB/s of a sequential pass.
const mappedResident = 256 << 20

// mappedBytes returns the bytes of a site's rows, rows rows of d
// covariates, that a fit maps rather than holds in the heap: the read's
// (the covariates, treatment and outcome as float64 and a 32-byte digest a
// row) when the covariates reach store.MapRowsMin, and the per-row results
// (resultArrays) when a row's array reaches mapped.LargeMin; on Linux
// alone (package mapped).
func mappedBytes(rows, d int) uint64 {
	if runtime.GOOS != "linux" {
		return 0
	}
	var b uint64
	if uint64(rows)*uint64(d)*8 >= store.MapRowsMin {
		b += uint64(rows) * uint64(8*(d+2)+len(store.RowDigest{}))
	}
	if rows >= mapped.LargeMin {
		b += uint64(rows) * 8 * resultArrays
	}
	return b
}

// resultArrays are the per-row arrays of a fit's results that are
// mapped.Large: the latent model's effects (estimator.Effects, six, and the
// propensity and two outcome means it is scored with) and the cross-fitted
// nuisances (three).
const resultArrays = 6 + 3 + 3

// memorySizes returns the two row counts the live heap is measured at,
// for a sample of m rows of a site of n: twice and four times the sample
// (at most the site's rows), or for a site no larger than its sample,
// half of it and all of it.
func memorySizes(m, n int) (small, large int) {
	if n <= m {
		return max(m/2, 1), m
	}
	return min(2*m, n), min(4*m, n)
}

// memorySample fits recs repeated to rows rows, with one round a model
// and one scoring sample a row, collecting garbage often
// (planGCPercent), and returns its largest live heap.
func memorySample(ctx context.Context, c SiteFit, recs *store.Records, rows int) (*sampleFit, error) {
	c.Config.Samples = 1
	f, err := fitSample(ctx, c, repeatRows(recs, rows), 1, planGCPercent)
	if err != nil {
		return nil, err
	}
	f.run = Run{}
	return f, nil
}

// repeatRows returns rows rows: r's rows over and over, each copy with
// ids of its own.
func repeatRows(r *store.Records, rows int) *store.Records {
	n := r.Len()
	if rows == n {
		return r
	}
	idx := make([]int, rows)
	for i := range idx {
		idx[i] = i % n
	}
	out := *r
	out.Data = r.Data.Subset(idx)
	out.IDs = make([]store.RowID, rows)
	for i := range out.IDs {
		out.IDs[i] = store.IntID(int64(i + 1))
	}
	out.XDigests = make([]store.RowDigest, rows)
	return &out
}

// watchMemory samples, every 10 ms until the returned function is
// called, the largest live heap (as the last collection found it) into
// f.live and, by the phase the fit is in (phase), into f.phases, and the
// largest memory the runtime holds other than the heap into f.other.
func watchMemory(f *sampleFit, phase func() int) (stop func()) {
	names := []string{
		"/memory/classes/total:bytes",
		"/memory/classes/heap/released:bytes",
		"/memory/classes/heap/objects:bytes",
		"/memory/classes/heap/unused:bytes",
		"/memory/classes/heap/free:bytes",
		"/gc/heap/live:bytes",
	}
	samples := make([]metrics.Sample, len(names))
	for i, n := range names {
		samples[i].Name = n
	}
	v := make([]uint64, len(samples))
	read := func() {
		metrics.Read(samples)
		for i, s := range samples {
			if s.Value.Kind() != metrics.KindUint64 {
				return
			}
			v[i] = s.Value.Uint64()
		}
		f.other = max(f.other, v[0]-v[1]-v[2]-v[3]-v[4])
		f.live = max(f.live, v[5])
		p := phase()
		for len(f.phases) <= p {
			f.phases = append(f.phases, 0)
		}
		f.phases[p] = max(f.phases[p], v[5])
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				read()
				return
			case <-t.C:
				read()
			}
		}
	}()
	return func() { close(done); <-finished }
}
