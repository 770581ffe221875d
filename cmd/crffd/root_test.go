package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCPUProfile: --cpu-profile writes a profile of the command, and
// names the file it cannot create.
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
}
