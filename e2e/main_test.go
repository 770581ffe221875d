package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/internal/testbin"
)

func TestMain(m *testing.M) { os.Exit(testbin.Main(m)) }

// result is what one crffd invocation printed and how it exited.
type result struct {
	stdout, stderr string
	code           int
}

// crffd runs the built crffd with args and extra environment variables and
// waits for it to finish. The deadline only stops a command that hangs: it
// is far above any command's time, since the fit of 1 000 rows in
// TestCSVToEstimateInThreeCommands took over two minutes with every
// package's tests at once on a shared 2-core machine.
func crffd(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(testbin.Build(t), "crffd"), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run crffd %v: %v", args, err)
	}
	return r
}

// mustSucceed fails the test unless r exited 0.
func (r result) mustSucceed(t *testing.T) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	return r
}

// mustFail fails the test unless r exited non-zero with every want in its
// standard error.
func (r result) mustFail(t *testing.T, want ...string) {
	t.Helper()
	if r.code == 0 {
		t.Fatalf("exit 0, want failure\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr does not contain %q:\n%s", w, r.stderr)
		}
	}
}
