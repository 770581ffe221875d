package estimator

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// parallelGrain is the least number of elements worth a goroutine in the
// coordinator's elementwise passes over the m·P parameters: below it the
// start-up costs more than the pass.
const parallelGrain = 1 << 15

// parallelRange calls f on consecutive ranges [lo, hi) covering [0, n), at
// most GOMAXPROCS of them and none shorter than grain (but the last), at
// once, and returns when all have returned. The boundaries are multiples of
// align, so that vector kernels split no vector. f must treat the elements
// (or units of work) independently, so that results do not depend on how
// [0, n) was split.
func parallelRange(n, grain, align int, f func(lo, hi int)) {
	parts := min(runtime.GOMAXPROCS(0), n/grain)
	if parts <= 1 {
		f(0, n)
		return
	}
	size := (n + parts - 1) / parts
	size = (size + align - 1) / align * align
	var wg sync.WaitGroup
	for lo := size; lo < n; lo += size {
		hi := min(lo+size, n)
		wg.Go(func() { f(lo, hi) })
	}
	f(0, min(size, n))
	wg.Wait()
}

// forEach calls f(i) for every i in [0, n), at most workers at once
// (GOMAXPROCS when workers ≤ 0), each worker taking the next i until none
// is left; the calling goroutine is one of them. It returns when all calls
// have returned. f must write only what belongs to its i.
func forEach(n, workers int, f func(i int)) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var next atomic.Int64
	work := func() {
		for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
			f(i)
		}
	}
	var wg sync.WaitGroup
	for range min(workers, n) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}
