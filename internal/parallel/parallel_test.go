package parallel

import (
	"sync/atomic"
	"testing"
)

func TestForEach(t *testing.T) {
	for _, tc := range []struct{ n, workers int }{{0, 2}, {1, 0}, {7, 1}, {100, 3}, {5, 16}} {
		seen := make([]atomic.Int32, tc.n)
		ForEach(tc.n, tc.workers, func(i int) { seen[i].Add(1) })
		for i := range seen {
			if c := seen[i].Load(); c != 1 {
				t.Errorf("n %d, workers %d: f(%d) called %d times, want once", tc.n, tc.workers, i, c)
			}
		}
	}
}
