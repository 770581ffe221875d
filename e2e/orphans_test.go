package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crffd/crffd/internal/testbin"
)

// markVar carries a mark unique to one crffd process into its
// environment. Plugins inherit only an allow-list of crffd's environment
// (plugins/host.PluginEnv), so the mark is a variable on that list: a
// temporary directory of the test's own.
const markVar = "TMPDIR"

// marked returns the PIDs of live processes whose environment holds
// markVar=mark. Plugins inherit markVar, so this counts crffd and every
// plugin it started, wherever they were reparented.
func marked(mark string) []int {
	want := []byte(markVar + "=" + mark + "\x00")
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && bytes.Contains(stat, []byte(") Z ")) {
			continue // a zombie has exited; only its parent's wait is missing
		}
		pids = append(pids, pid)
	}
	return pids
}

// markedEnv returns this process's environment with markVar set to mark,
// a directory unique to the caller (t.TempDir()).
func markedEnv(mark string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, markVar+"=") })
	return append(env, markVar+"="+mark)
}

// waitFor polls cond every 5 ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// TestNoOrphanPlugins starts crffd with a slow self-test, waits until a
// plugin process is running, ends crffd in each way it can end, and counts
// the processes left that carry its environment: there must be none.
func TestNoOrphanPlugins(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts processes through /proc")
	}
	bin := testbin.Build(t)
	for _, tc := range []struct {
		name string
		stop func(p *os.Process) error
		exit int // expected exit status; -1 for killed by a signal
	}{
		{"normal exit", nil, 0},
		{"SIGINT", func(p *os.Process) error { return p.Signal(os.Interrupt) }, 130},
		{"SIGTERM", func(p *os.Process) error { return p.Signal(syscall.SIGTERM) }, 130},
		{"SIGKILL", func(p *os.Process) error { return p.Kill() }, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mark := t.TempDir()
			args := []string{"kernels", "verify"}
			if tc.stop != nil {
				// Large enough that the run is still going when the signal comes.
				args = append(args, "--features", "1000000", "--pairs", "5000")
			}
			cmd := exec.Command(filepath.Join(bin, "crffd"), args...)
			cmd.Env = markedEnv(mark)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if tc.stop != nil {
				if !waitFor(30*time.Second, func() bool { return len(marked(mark)) >= 2 }) {
					cmd.Process.Kill()
					t.Fatalf("no plugin process appeared; stderr:\n%s", stderr.String())
				}
				if err := tc.stop(cmd.Process); err != nil {
					t.Fatal(err)
				}
			}
			err := cmd.Wait()
			code := cmd.ProcessState.ExitCode()
			if code != tc.exit {
				t.Errorf("exit status %d (%v), want %d; stderr:\n%s", code, err, tc.exit, stderr.String())
			}
			if !waitFor(5*time.Second, func() bool { return len(marked(mark)) == 0 }) {
				pids := marked(mark)
				for _, pid := range pids {
					syscall.Kill(pid, syscall.SIGKILL)
				}
				t.Fatalf("%d processes left after crffd ended: %v", len(pids), pids)
			}
		})
	}
}
