package estimator

import (
	"runtime"
	"sync"
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
