//go:build !linux

package demo

// peakRSS is not known off Linux, which alone has /proc/PID/status.
func peakRSS(int) (int64, bool) { return 0, false }
