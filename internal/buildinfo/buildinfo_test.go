package buildinfo

import (
	"runtime/debug"
	"testing"
)

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
		if got := Describe(tc.v, tc.bi); got != tc.want {
			t.Errorf("Describe(%q) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
