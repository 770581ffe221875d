// Package testbin builds crffd and its plugin executables for tests that
// run them as real processes. Each test binary builds them once, into a
// temporary directory that Main removes at the end.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Packages are the main packages Build compiles, relative to the module root.
var Packages = []string{"./cmd/crffd", "./plugins/kernels/...", "./plugins/transport/..."}

var (
	once     sync.Once
	dir      string
	buildErr error
)

// Root returns the module root, the directory holding go.mod.
func Root() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside a Go module")
	}
	return filepath.Dir(mod), nil
}

// Build returns a directory holding crffd and every built-in plugin,
// building them on the first call. It fails the test if the build fails.
func Build(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		var root string
		if root, buildErr = Root(); buildErr != nil {
			return
		}
		if dir, buildErr = os.MkdirTemp("", "crffd-testbin-"); buildErr != nil {
			return
		}
		args := append([]string{"build", "-o", dir + string(os.PathSeparator)}, Packages...)
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return dir
}

// BuildPackage builds the main package at pkg (a path relative to the
// module root, such as a testdata folder) into outDir/name.
func BuildPackage(t testing.TB, pkg, outDir, name string) string {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(outDir, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// Main runs the tests of a package and removes the built binaries.
// Use it as: func TestMain(m *testing.M) { os.Exit(testbin.Main(m)) }.
func Main(m *testing.M) int {
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	return code
}
