// Package profile writes the profiles of one command's run that go tool
// pprof reads: a CPU profile over the run, and a profile of the memory it
// allocated, written when the run ends.
package profile

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// Run is a command's profiling under way; Stop ends it.
type Run struct {
	cpu     *os.File
	memPath string
}

// Start starts a CPU profile into the file cpuPath, unless empty, and
// keeps memPath, unless empty, for Stop to write the memory profile to.
// Each file is named in its errors by the flag that set it (--cpu-profile,
// --mem-profile).
func Start(cpuPath, memPath string) (*Run, error) {
	r := &Run{memPath: memPath}
	if memPath != "" {
		// Checked now, not after an hour's fit.
		f, err := os.Create(memPath)
		if err != nil {
			return nil, fmt.Errorf("--mem-profile: %w", err)
		}
		f.Close()
	}
	if cpuPath == "" {
		return r, nil
	}
	f, err := os.Create(cpuPath)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpu-profile %q: %w", cpuPath, err)
	}
	r.cpu = f
	return r, nil
}

// Stop ends the CPU profile and writes the memory profile: every
// allocation of the run by where it was made (alloc_space, in go tool
// pprof -sample_index), and what was still in use at the end
// (inuse_space). A nil Run does nothing.
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
	if r.memPath != "" {
		runtime.GC() // so that inuse_space is what is reachable
		f, err := os.Create(r.memPath)
		if err == nil {
			err = pprof.Lookup("allocs").WriteTo(f, 0)
			errs = append(errs, f.Close())
		}
		errs = append(errs, err)
		r.memPath = ""
	}
	return errors.Join(errs...)
}
