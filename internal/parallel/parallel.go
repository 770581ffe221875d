// Package parallel runs independent units of work on every core.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// ForEach calls f(i) for every i in [0, n), at most workers at once
// (GOMAXPROCS when workers ≤ 0), each worker taking the next i until none
// is left; the calling goroutine is one of them. It returns when all calls
// have returned. f must write only what belongs to its i, so that results
// do not depend on the number of workers.
func ForEach(n, workers int, f func(i int)) {
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
