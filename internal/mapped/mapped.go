// Package mapped provides large arrays of plain values (no pointers) held
// in a shared mapping of an unnamed temporary file rather than in the Go
// heap, for one-shot commands that read a site's rows once and keep them
// to the end.
//
// The kernel pages such an array in as it is read and may write it out
// and drop it under memory pressure, as it does any file's pages, where a
// heap array of the same size must stay resident. It is also outside what
// the garbage collector paces: a heap of L live bytes grows to about 2L
// before each collection (GOGC=100), an array here adds its size once.
//
// The file is made with O_TMPFILE, so it never has a name another process
// could open, and its disk blocks are reserved when it is made, so that a
// full disk fails the allocation rather than a later write (which, to a
// mapping, is a SIGBUS). It is readable by its owner alone. A mapping is
// never released: the process's end frees it and the file with it, so
// the arrays are for values that live as long as the process.
//
// The pages of a mapping that the process has read or written count in
// its resident set, as the kernel and the user measure it, until the
// kernel needs them back, and a fit that reads every row in turn would
// thus be charged the whole file. Every EvictEvery the package drops them
// from the process (Evict): the page cache keeps them, so the next read of
// one is a minor fault, and the process is charged only for the pages
// mapped since. A read fault maps the pages around the one read too
// (the kernel's fault-around, 64 KB), so random reads of a few thousand
// rows map far more than they read.
package mapped

import (
	"errors"
	"sync"
	"time"
)

// EvictEvery is how often the pages of the mappings are dropped from the
// process's resident set.
const EvictEvery = 250 * time.Millisecond

// Value is what an array in a mapping may hold: types without pointers,
// since the collector does not look into mappings for what they point to.
type Value interface {
	~float64 | ~int64 | ~int | ~[32]byte
}

// Float64s returns n zeroed float64s in a mapping (Array).
func Float64s(dir string, n int) ([]float64, error) { return Array[float64](dir, n) }

// ErrUnsupported reports a system or filesystem without unnamed temporary
// files or shared mappings; callers fall back to the heap.
var ErrUnsupported = errors.New("mapped: not supported here")

// LargeMin is the fewest values of an array a one-shot fit has Large put
// in a mapping: 4 MiB of float64.
const LargeMin = 1 << 19

// large is where Large maps arrays: in dir ("" for nowhere), from min
// values.
var large struct {
	sync.Mutex
	dir string
	min int
}

// Use makes Large put arrays of at least min values in mappings of
// unnamed files in dir, until the returned function restores the setting
// before; dir "" returns them to the heap. Only a process that ends when
// its work does should call it: mappings are never released.
func Use(dir string, min int) (restore func()) {
	large.Lock()
	defer large.Unlock()
	was, wasMin := large.dir, large.min
	large.dir, large.min = dir, max(min, 1)
	return func() {
		large.Lock()
		defer large.Unlock()
		large.dir, large.min = was, wasMin
	}
}

// Large returns n zeroed float64s (LargeArray).
func Large(n int) []float64 { return LargeArray[float64](n) }

// LargeArray returns n zero values of T: in a mapping in the folder Use
// gave when there is one and n is at least its minimum, else, or should
// the mapping fail, in the heap. Per-row arrays of millions of rows are
// made with it, so that a one-shot fit does not hold them in its heap.
func LargeArray[T Value](n int) []T {
	large.Lock()
	dir, least := large.dir, large.min
	large.Unlock()
	if dir != "" && n >= least && n > 0 {
		if a, err := Array[T](dir, n); err == nil {
			return a
		}
	}
	return make([]T, n)
}
