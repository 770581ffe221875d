package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCPUProfile: --cpu-profile, --mem-profile and --peak-heap-profile
// write profiles of the command, and name the file they cannot create.
func TestCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	if _, err := execute(t, "simulate", "--out", t.TempDir(), "--cpu-profile", path); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Errorf("profile %s: %v, %v", path, fi, err)
	}
	missing := filepath.Join(t.TempDir(), "no", "such", "cpu.pprof")
	if _, err := execute(t, "version", "--cpu-profile", missing); err == nil || !strings.Contains(err.Error(), "--cpu-profile") {
		t.Errorf("profile in a missing folder: %v", err)
	}
	// --mem-profile: the allocations, written at the end; a folder that
	// is missing is named before the command runs.
	mem := filepath.Join(t.TempDir(), "mem.pprof")
	if _, err := execute(t, "simulate", "--out", t.TempDir(), "--mem-profile", mem); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(mem); err != nil || fi.Size() == 0 {
		t.Errorf("memory profile %s: %v, %v", mem, fi, err)
	}
	if _, err := execute(t, "version", "--mem-profile", missing); err == nil || !strings.Contains(err.Error(), "--mem-profile") {
		t.Errorf("memory profile in a missing folder: %v", err)
	}
	// --peak-heap-profile: the heap at its largest (internal/profile
	// tests that it is the peak's).
	peak := filepath.Join(t.TempDir(), "peak.pprof")
	if _, err := execute(t, "simulate", "--out", t.TempDir(), "--peak-heap-profile", peak); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(peak); err != nil || fi.Size() == 0 {
		t.Errorf("peak heap profile %s: %v, %v", peak, fi, err)
	}
	if _, err := execute(t, "version", "--peak-heap-profile", missing); err == nil || !strings.Contains(err.Error(), "--peak-heap-profile") {
		t.Errorf("peak heap profile in a missing folder: %v", err)
	}
}
