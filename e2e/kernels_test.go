package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/crffd/crffd/internal/testbin"
	"github.com/crffd/crffd/plugins/host"
)

// verifyRow matches one result line of `crffd kernels verify`.
var verifyRow = regexp.MustCompile(`(?m)^(\w+)\s+(\S+)\s+5\s+20000\s+200\s+\[[0-9.]+, [0-9.]+\]\s+([0-9.]+)\s+([0-9.]+)\s+0\.03\s+(ok|FAIL)$`)

func TestKernelsVerifyBuiltins(t *testing.T) {
	r := crffd(t, nil, "kernels", "verify").mustSucceed(t)
	rows := verifyRow.FindAllStringSubmatch(r.stdout, -1)
	got := map[string]bool{}
	for _, row := range rows {
		got[row[1]+" "+row[2]] = row[5] == "ok"
	}
	for _, want := range []string{"gaussian -", "laplacian -", "matern nu=0.5", "matern nu=1.5", "matern nu=2.5"} {
		if ok, found := got[want]; !found || !ok {
			t.Errorf("no passing row for %s in:\n%s", want, r.stdout)
		}
	}
	if len(rows) != 5 {
		t.Errorf("%d result rows, want 5:\n%s", len(rows), r.stdout)
	}
}

func TestKernelsVerifyFailsOnTightTolerance(t *testing.T) {
	r := crffd(t, nil, "kernels", "verify", "gaussian", "--features", "50", "--tolerance", "0.001")
	r.mustFail(t, "kernel self-test failed: gaussian(-)")
	if !strings.Contains(r.stdout, "FAIL") {
		t.Errorf("no FAIL row in:\n%s", r.stdout)
	}
}

func TestKernelsList(t *testing.T) {
	r := crffd(t, nil, "kernels", "list").mustSucceed(t)
	for _, want := range []string{"gaussian", "laplacian", "matern", "nu=1.5", filepath.Join(testbin.Build(t), "crff-kernel-matern")} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("kernels list lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestMissingPlugin(t *testing.T) {
	bin := testbin.Build(t)
	crffd(t, nil, "kernels", "verify", "nosuch").mustFail(t,
		`kernel plugin "nosuch": no executable `+filepath.Join(bin, "crff-kernel-nosuch"), "plugin not found")

	empty := t.TempDir()
	crffd(t, nil, "kernels", "list", "--plugin-dir", empty).mustFail(t, "no kernel plugins (crff-kernel-*) in "+`"`+empty+`"`)

	// A file with a plugin's name that is not executable is not a plugin.
	if err := os.WriteFile(filepath.Join(empty, "crff-kernel-text"), []byte("not a program"), 0o644); err != nil {
		t.Fatal(err)
	}
	crffd(t, nil, "kernels", "verify", "text", "--plugin-dir", empty).mustFail(t, "is not an executable file")

	// An executable that is not a crffd plugin fails the handshake.
	fake := filepath.Join(empty, "crff-kernel-fake")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	crffd(t, nil, "kernels", "verify", "fake", "--plugin-dir", empty).mustFail(t, `start kernel plugin "fake"`)
}

func TestHashPin(t *testing.T) {
	bin := testbin.Build(t)
	path := filepath.Join(bin, "crff-kernel-gaussian")
	good, err := host.SHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Repeat("ab", 32)
	cfg := filepath.Join(t.TempDir(), "crffd.yaml")
	write := func(pin string) {
		body := "plugin_sha256:\n  crff-kernel-gaussian: " + pin + "\n"
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	write(bad)
	crffd(t, nil, "kernels", "verify", "gaussian", "--config", cfg).mustFail(t,
		"has SHA-256 "+good, "pinned "+bad, "plugin SHA-256 does not match its pin")

	write(good)
	crffd(t, nil, "kernels", "verify", "gaussian", "--config", cfg).mustSucceed(t)

	// The environment overrides the file.
	env := []string{"CRFFD_PLUGIN_SHA256_CRFF_KERNEL_GAUSSIAN=" + bad}
	crffd(t, env, "kernels", "verify", "gaussian", "--config", cfg).mustFail(t, "pinned "+bad)

	// A pin on one plugin leaves the others alone, and a malformed pin is named.
	write("xyz")
	crffd(t, nil, "kernels", "verify", "laplacian", "--config", cfg).mustSucceed(t)
	crffd(t, nil, "kernels", "verify", "gaussian", "--config", cfg).mustFail(t, `pinned SHA-256 "xyz" is not 64 hex digits`)
}

// TestThirdPartyKernel builds the example plugin of docs/plugins.md from
// testdata, the way a third party would, and runs the self-test on it.
func TestThirdPartyKernel(t *testing.T) {
	dir := t.TempDir()
	testbin.BuildPackage(t, "./e2e/testdata/kernel-rq", dir, "crff-kernel-rq")
	r := crffd(t, nil, "kernels", "verify", "rq", "--plugin-dir", dir).mustSucceed(t)
	if n := len(verifyRow.FindAllString(r.stdout, -1)); n != 2 {
		t.Errorf("%d result rows for alpha = 2 and 0.5, want 2:\n%s", n, r.stdout)
	}

	// docs/plugins.md shows the same program, so that it cannot drift.
	root, err := testbin.Root()
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(root, "docs", "plugins.md"))
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join("testdata", "kernel-rq", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "```go\n"+string(example)+"```\n") {
		t.Error("docs/plugins.md does not hold e2e/testdata/kernel-rq/main.go verbatim in a ```go block")
	}
}
