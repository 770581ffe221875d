package demo

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// peakRSS returns the largest resident set of the running process pid so
// far, in bytes: VmHWM of /proc/PID/status, the high-water mark of the
// memory it has mapped since its exec. (wait4's ru_maxrss is no use here:
// a child started by fork and exec inherits its parent's high-water mark,
// so every daemon of the demo reported the demo's own.)
func peakRSS(pid int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte("kB")))), 10, 64)
			if err != nil {
				return 0, false
			}
			return kb << 10, true
		}
	}
	return 0, false
}
