package deps_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/crffd/crffd/"

// plugin matches the main package of a plugin executable.
var plugin = regexp.MustCompile(`^` + module + `plugins/(kernels/crff-kernel|transport/crff-transport)-[^/]+$`)

// goList runs go list with args in the module and returns its lines; it
// skips the test when no go command is on the PATH.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on the PATH")
	}
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
		}
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// deps returns the packages of crffd each of pkgs depends on, directly or
// not, by import path.
func deps(t *testing.T, pkgs ...string) map[string][]string {
	t.Helper()
	readSources(t, pkgs...)
	out := map[string][]string{}
	for _, line := range goList(t, append([]string{"-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`}, pkgs...)...) {
		fields := strings.Fields(line)
		for _, d := range fields[1:] {
			if strings.HasPrefix(d, module) {
				out[fields[0]] = append(out[fields[0]], d)
			}
		}
		if _, ok := out[fields[0]]; !ok {
			out[fields[0]] = nil
		}
	}
	return out
}

// readSources reads the directories and Go files of the packages of crffd
// that pkgs depend on. go test caches a passing result and reuses it until
// a file the test itself opened changes; go list's reads do not count, so
// without this an import added later would pass from the cache.
func readSources(t *testing.T, pkgs ...string) {
	t.Helper()
	for _, dir := range goList(t, append([]string{"-deps", "-f", `{{if and .Module .Module.Main}}{{.Dir}}{{end}}`}, pkgs...)...) {
		if dir == "" {
			continue // a package of another module or of the standard library
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".go") {
				if _, err := os.ReadFile(filepath.Join(dir, e.Name())); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// plugins returns the import paths of the plugin executables' main packages.
func plugins(t *testing.T) []string {
	t.Helper()
	// Listing the directories makes a new plugin invalidate a cached pass.
	for _, dir := range []string{"../../plugins/kernels", "../../plugins/transport"} {
		if _, err := os.ReadDir(dir); err != nil {
			t.Fatal(err)
		}
	}
	var out []string
	for _, p := range goList(t, "./plugins/...") {
		if plugin.MatchString(p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatal("no plugin executables under plugins/")
	}
	return out
}

// forbid fails for each package of got that depends on one of banned.
func forbid(t *testing.T, got map[string][]string, banned ...string) {
	t.Helper()
	for pkg, ds := range got {
		for _, b := range banned {
			if slices.Contains(ds, module+b) {
				t.Errorf("%s imports %s%s", pkg, module, b)
			}
		}
	}
}

// TestNoEstimator: the packages that read rows and certificates and the
// kernel SDK take their types from leaves, not from the estimator.
func TestNoEstimator(t *testing.T) {
	forbid(t, deps(t, "./dataset", "./store", "./certs", "./plugins/kernels"), "estimator")
}

// TestPluginsLinkNoModel: a plugin executable, ours or a third party's
// built on the SDK, links none of the model, selection, storage or
// protocol packages.
func TestPluginsLinkNoModel(t *testing.T) {
	forbid(t, deps(t, plugins(t)...), "estimator", "selection", "store", "federation")
}

// TestLeaves: the leaf packages import nothing of crffd.
func TestLeaves(t *testing.T) {
	for pkg, ds := range deps(t, "./records", "./ident") {
		if len(ds) > 0 {
			t.Errorf("%s imports %v; it must stay a leaf", pkg, ds)
		}
	}
}
