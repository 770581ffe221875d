package pipeline

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/internal/mapped"
	"github.com/crffd/crffd/records"
	"github.com/crffd/crffd/store"
)

// memory returns the peak memory at rows rows: the live heap, grown by
// the collector's headroom (GOGC: the heap grows to (1+GOGC/100) times
// the live heap before a collection), plus what of the mapped rows is
// resident at once (at most mappedResident of mapped bytes) and the
// memory outside the heap.
//
// The live heap is the largest over the fits' phases (the spans between
// one training's end and the next's, the same in both fits) of that
// phase's live heap, grown from the larger of its two measures by the
// bytes a row adds: phase by phase, because what dominates at the
// sample's size (the training's workspaces) is not what dominates at the
// site's (what the rows hold). A row's bytes are the median over the
// phases of their growth per row between the two fits: each phase's own
// is noise-ridden (a chunk of features live at one measure and not at the
// other is tens of megabytes, hundreds of bytes a row between fits 40 000
// rows apart), and a phase's error is multiplied by the site's rows.
func memory(a, b *sampleFit, rows int, mapped uint64) uint64 {
	lo, hi := a, b
	if lo.rows > hi.rows {
		lo, hi = hi, lo
	}
	pairs := [][2]uint64{{lo.live, hi.live}}
	if len(lo.phases) == len(hi.phases) {
		pairs = pairs[:0]
		for p := range lo.phases {
			if lo.phases[p] > 0 && hi.phases[p] > 0 { // a phase too short to sample has none
				pairs = append(pairs, [2]uint64{lo.phases[p], hi.phases[p]})
			}
		}
		if len(pairs) == 0 {
			pairs = [][2]uint64{{lo.live, hi.live}}
		}
	}
	perRow := 0.0
	if hi.rows > lo.rows {
		growth := make([]float64, len(pairs))
		for i, p := range pairs {
			growth[i] = max(float64(p[1])-float64(p[0]), 0) / float64(hi.rows-lo.rows)
		}
		slices.Sort(growth)
		perRow = growth[len(growth)/2]
		if len(growth)%2 == 0 {
			perRow = (growth[len(growth)/2-1] + perRow) / 2
		}
	}
	live := float64(max(lo.live, hi.live))
	for _, p := range pairs {
		live = max(live, float64(p[0])+perRow*float64(max(rows-lo.rows, 0)), float64(p[1])+perRow*float64(max(rows-hi.rows, 0)))
	}
	gc := debug.SetGCPercent(100)
	debug.SetGCPercent(gc)
	if gc < 0 {
		gc = 100
	}
	return uint64(live*(1+float64(gc)/100)) + min(mapped, mappedResident) + max(a.other, b.other)
}

// mappedResident is the most of the mapped rows resident at once: a
// training round reads a batch of 4096 random rows, and the kernel maps
// 64 KB of the file around each page it faults in (fault-around), 256 MiB,
// which the eviction every mapped.EvictEvery drops again.
const mappedResident = 256 << 20

// mappedBytes returns the bytes of a site's rows, rows rows of d
// covariates, that its read maps rather than holds in the heap (the
// covariates, treatment and outcome as float64 and a 32-byte digest a
// row), when the covariates reach store.MapRowsMin on Linux (package
// mapped), else 0. The per-row results mapped later are written in order
// and add nothing to what a batch maps.
func mappedBytes(rows, d int) uint64 {
	if runtime.GOOS != "linux" || !mapsRead(rows, d) {
		return 0
	}
	return uint64(rows) * uint64(8*(d+2)+len(store.RowDigest{}))
}

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
// (planGCPercent), and returns its largest live heap. What the fit of the
// site's siteRows rows would keep in mappings (package mapped) is mapped
// here too, in dir, so that the live heap is what that fit's would be:
// the rows when the site's covariates reach store.MapRowsMin, and the
// per-row arrays as long, relative to the rows, as those the site's fit
// maps from mapped.LargeMin values.
func memorySample(ctx context.Context, c SiteFit, recs *store.Records, rows, siteRows int, dir string) (*sampleFit, error) {
	c.Config.Samples = 1
	least := int(math.Ceil(float64(mapped.LargeMin) * float64(rows) / float64(max(siteRows, 1))))
	defer mapped.Use(dir, least)()
	_, d := recs.Data.X.Dims()
	f, err := fitSample(ctx, c, repeatRows(recs, rows, dir != "" && mapsRead(siteRows, d)), 1, planGCPercent)
	if err != nil {
		return nil, err
	}
	f.run = Run{}
	return f, nil
}

// mapsRead reports whether the read of rows rows of d covariates keeps
// them in mappings (store.MapRowsMin).
func mapsRead(rows, d int) bool {
	return uint64(rows)*uint64(d)*8 >= store.MapRowsMin
}

// repeatRows returns rows rows: r's rows over and over, each copy with
// ids of its own; with inMappings, the covariates, treatments, outcomes
// and digests in mappings (mapped.LargeArray, in the folder of the
// setting in force), as a read of a large site keeps them.
func repeatRows(r *store.Records, rows int, inMappings bool) *store.Records {
	n := r.Len()
	if rows == n && !inMappings {
		return r
	}
	_, d := r.Data.X.Dims()
	floats := func(k int) []float64 { return make([]float64, k) }
	digests := func(k int) []store.RowDigest { return make([]store.RowDigest, k) }
	if inMappings {
		floats, digests = mapped.LargeArray[float64], mapped.LargeArray[store.RowDigest]
	}
	x, w, y := floats(rows*d), floats(rows), floats(rows)
	for i := range rows {
		copy(x[i*d:(i+1)*d], r.Data.X.RawRowView(i%n))
		w[i], y[i] = r.Data.W[i%n], r.Data.Y[i%n]
	}
	out := *r
	out.Data = &records.Data{X: mat.NewDense(rows, d, x), W: w, Y: y}
	out.IDs = make([]store.RowID, rows)
	for i := range out.IDs {
		out.IDs[i] = store.IntID(int64(i + 1))
	}
	out.XDigests = digests(rows)
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
