package main

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestTightenGC: the fitting commands' collector setting, unless the
// environment's GOGC says otherwise.
func TestTightenGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, c := range []struct {
		env  string // "": GOGC unset
		want int
	}{{"", fitGCPercent}, {"100", 100}, {"off", 100}} {
		debug.SetGCPercent(100)
		t.Setenv("GOGC", c.env) // restored when the test ends
		if c.env == "" {
			os.Unsetenv("GOGC")
		}
		tightenGC()
		if got := debug.SetGCPercent(100); got != c.want {
			t.Errorf("GOGC=%q: collector at %d, want %d", c.env, got, c.want)
		}
	}
}
