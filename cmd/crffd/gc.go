package main

import (
	"os"
	"runtime/debug"
)

// fitGCPercent is the collector's setting (GOGC) of the commands that fit
// models, fit and site, unless the environment sets GOGC. The runtime's
// default of 100 lets the heap grow to twice its live bytes before each
// collection; a fit's live heap is mostly large arrays of numbers, which
// the collector marks without scanning, and it spent under 1% of the CPU
// of a million-row fit (GODEBUG=gctrace=1), so at 25 the headroom shrinks
// from the live heap to a quarter of it for little more work.
const fitGCPercent = 25

// tightenGC sets the collector to fitGCPercent unless GOGC is set in the
// environment, which then wins.
func tightenGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(fitGCPercent)
	}
}
