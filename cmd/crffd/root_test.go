package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
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

func TestVersionString(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.26.0", Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "1a2b3c4d5e6f7a8b9c0d"}, {Key: "vcs.time", Value: "2026-11-25T02:54:03Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		v    string
		bi   *debug.BuildInfo
		want string
	}{
		{"v0.4.0", stamped, "crffd v0.4.0 (commit 1a2b3c4d5e6f with uncommitted changes, 2026-11-25T02:54:03Z, go1.26.0)"},
		{"dev", &debug.BuildInfo{GoVersion: "go1.26.0"}, "crffd dev (no version or commit recorded: build with make build, go1.26.0)"},
		{"v0.4.0", nil, "crffd v0.4.0"},
	} {
		if got := versionString(tc.v, tc.bi); got != tc.want {
			t.Errorf("versionString(%q) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
