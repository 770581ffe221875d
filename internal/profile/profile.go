// Package profile writes the profiles of one command's run that go tool
// pprof reads: a CPU profile over the run, a profile of the memory it
// allocated, written when the run ends, and the heap in use when the live
// heap was at its largest.
package profile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"time"
)

// Paths are the files a Run writes; an empty path writes no such profile.
type Paths struct {
	CPU  string // --cpu-profile: the CPU profile of the run
	Mem  string // --mem-profile: the run's allocations, written when it ends
	Peak string // --peak-heap-profile: the heap in use at the largest live heap
}

// Run is a command's profiling under way; Stop ends it.
type Run struct {
	cpu   *os.File
	paths Paths
	peak  *peakWatch
}

// Start starts the profiles of paths. Each file is created at once, so that
// a path that cannot be written is refused now, not after an hour's fit,
// and each is named in its errors by the flag that sets it.
func Start(paths Paths) (*Run, error) {
	r := &Run{paths: paths}
	for _, p := range []struct{ flag, path string }{{"--mem-profile", paths.Mem}, {"--peak-heap-profile", paths.Peak}} {
		if p.path == "" {
			continue
		}
		f, err := os.Create(p.path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.flag, err)
		}
		f.Close()
	}
	if paths.Peak != "" {
		r.peak = watchPeak(peakPoll)
	}
	if paths.CPU == "" {
		return r, nil
	}
	f, err := os.Create(paths.CPU)
	if err != nil {
		r.peak.stop()
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		r.peak.stop()
		return nil, fmt.Errorf("--cpu-profile %q: %w", paths.CPU, err)
	}
	r.cpu = f
	return r, nil
}

// Stop ends the CPU profile and writes the memory profiles: every
// allocation of the run by where it was made (alloc_space, in go tool
// pprof -sample_index) with what was still in use at the end
// (inuse_space), and the heap in use at the largest live heap. A nil Run
// does nothing.
func (r *Run) Stop() error {
	if r == nil {
		return nil
	}
	var errs []error
	if r.cpu != nil {
		pprof.StopCPUProfile()
		errs = append(errs, r.cpu.Close())
		r.cpu = nil
	}
	if r.peak != nil {
		prof, _ := r.peak.stop()
		errs = append(errs, os.WriteFile(r.paths.Peak, prof, 0o644))
		r.peak = nil
	}
	if r.paths.Mem != "" {
		runtime.GC() // so that inuse_space is what is reachable
		f, err := os.Create(r.paths.Mem)
		if err == nil {
			err = pprof.Lookup("allocs").WriteTo(f, 0)
			errs = append(errs, f.Close())
		}
		errs = append(errs, err)
		r.paths.Mem = ""
	}
	return errors.Join(errs...)
}

// PeakLive returns the largest live heap the collector has found since
// Start, in bytes, when the run watches it (Paths.Peak), else 0.
func (r *Run) PeakLive() uint64 {
	if r == nil || r.peak == nil {
		return 0
	}
	r.peak.mu.Lock()
	defer r.peak.mu.Unlock()
	return r.peak.max
}

// peakPoll is how often the live heap is read: each read is a few
// microseconds, and a garbage collection of a large heap takes longer.
const peakPoll = 100 * time.Millisecond

// peakWatch keeps the heap profile of the largest live heap seen. The
// live heap (runtime/metrics /gc/heap/live:bytes) is what the last
// collection marked; the heap profile publishes a collection's in-use
// figures only when the next one ends (runtime.MemProfile: "up to two
// garbage collection cycles old"), so the profile of a new high is taken
// after the collection that follows it, and shows the heap as the high's
// collection marked it. A new high must exceed the last profiled one by
// 1/32, so that a slowly rising heap costs a few dozen profiles.
type peakWatch struct {
	mu      sync.Mutex
	max     uint64 // the largest live heap seen
	profAt  uint64 // the live heap of prof, or of the high pending
	pending uint64 // the collection of a high not yet profiled; 0: none
	prof    []byte
	err     error
	done    chan struct{}
	stopped chan struct{}
}

func watchPeak(every time.Duration) *peakWatch {
	w := &peakWatch{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(w.stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			w.poll()
			select {
			case <-w.done:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// poll reads the live heap and the collections so far, notes a new high,
// and profiles a noted high one collection on.
func (w *peakWatch) poll() {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return
	}
	live, cycles := s[0].Value.Uint64(), s[1].Value.Uint64()
	w.mu.Lock()
	w.max = max(w.max, live)
	if cycles > 0 && (w.profAt == 0 || live > w.profAt+w.profAt/32) {
		w.profAt, w.pending = live, cycles
	}
	take := w.pending > 0 && cycles >= w.pending+1
	w.mu.Unlock()
	if !take {
		return
	}
	var b bytes.Buffer
	err := pprof.Lookup("heap").WriteTo(&b, 0)
	w.mu.Lock()
	w.prof, w.err, w.pending = b.Bytes(), err, 0
	w.mu.Unlock()
}

// stop ends the watch and returns the profile of the largest live heap;
// a high still waiting for its next collection gets it now.
func (w *peakWatch) stop() ([]byte, error) {
	if w == nil {
		return nil, nil
	}
	close(w.done)
	<-w.stopped
	w.mu.Lock()
	pending := w.pending > 0
	w.mu.Unlock()
	if pending {
		runtime.GC()
		w.poll()
	}
	if w.prof == nil {
		var b bytes.Buffer
		err := pprof.Lookup("heap").WriteTo(&b, 0)
		return b.Bytes(), err
	}
	return w.prof, w.err
}
