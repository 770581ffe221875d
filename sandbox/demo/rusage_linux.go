package demo

import (
	"os"
	"syscall"
)

// peakRSS returns the largest resident set of the ended process ps, in
// bytes, as the kernel counted it (ru_maxrss, which Linux gives in KiB):
// wait4 gives the largest of the process and its children it reaped.
func peakRSS(ps *os.ProcessState) (int64, bool) {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok || ru == nil {
		return 0, false
	}
	return ru.Maxrss * 1024, true
}
