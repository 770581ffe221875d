package profile

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// keep holds the test's large allocation where the compiler cannot drop it.
var keep []byte

// TestPeakHeapProfile: the peak profile is taken while a large allocation
// was live, not when the run ended after it was dropped: its in-use bytes
// name the allocating function, which the end's heap no longer holds.
func TestPeakHeapProfile(t *testing.T) {
	dir := t.TempDir()
	paths := Paths{Peak: filepath.Join(dir, "peak.pprof"), Mem: filepath.Join(dir, "mem.pprof")}
	r, err := Start(paths)
	if err != nil {
		t.Fatal(err)
	}
	const big = 256 << 20
	allocatePeak(big)
	runtime.GC()
	deadline := time.Now().Add(10 * time.Second)
	for r.PeakLive() < big && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := r.PeakLive(); got < big {
		t.Fatalf("peak live heap %d bytes, want at least %d", got, big)
	}
	// A collection while the allocation lives, then a poll: the profile
	// of the high is taken after it.
	runtime.GC()
	time.Sleep(3 * peakPoll)
	keep = nil
	runtime.GC()
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if top := inUse(t, paths.Peak); !strings.Contains(top, "allocatePeak") {
		t.Errorf("the peak profile's heap in use does not hold allocatePeak's bytes:\n%s", top)
	}
	if top := inUse(t, paths.Mem); strings.Contains(top, "allocatePeak") {
		t.Errorf("the end's heap in use holds allocatePeak's bytes, dropped before the end:\n%s", top)
	}
	if fi, err := os.Stat(paths.Mem); err != nil || fi.Size() == 0 {
		t.Errorf("memory profile: %v, %v", fi, err)
	}
}

//go:noinline
func allocatePeak(n int) {
	keep = make([]byte, n)
	for i := range keep {
		keep[i] = byte(i)
	}
}

// inUse returns go tool pprof's listing of the heap in use in the
// profile at path, by function.
func inUse(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("go", "tool", "pprof", "-sample_index=inuse_space", "-top", path).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof %s: %v\n%s", path, err, out)
	}
	return string(out)
}

// TestStartRefusesUnwritablePaths: a profile that cannot be written is
// named by its flag before the run begins.
func TestStartRefusesUnwritablePaths(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no", "such", "file")
	for _, c := range []struct {
		paths Paths
		flag  string
	}{
		{Paths{CPU: missing}, "--cpu-profile"},
		{Paths{Mem: missing}, "--mem-profile"},
		{Paths{Peak: missing}, "--peak-heap-profile"},
	} {
		if _, err := Start(c.paths); err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%+v: %v, want an error naming %s", c.paths, err, c.flag)
		}
	}
}
