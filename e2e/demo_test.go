package e2e

import (
	"bytes"
	"math"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/crffd/crffd/internal/testbin"
)

var (
	demoSiteRow = regexp.MustCompile(`(?m)^(site\d)\s+(\d+)\s+\d+%\s+(-?[0-9.]+)\s+(-?[0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+\[(-?[0-9.]+), (-?[0-9.]+)\] \((covers|misses) the truth\)\s+(-?[0-9.]+)$`)
	demoGlobal  = regexp.MustCompile(`global ATE (-?[0-9.]+) \(n-weighted mean of the local ATEs: (-?[0-9.]+)\); true (-?[0-9.]+); error ([0-9.]+); 95% interval \[(-?[0-9.]+), (-?[0-9.]+)\] \((covers|misses) the truth\)`)
)

// TestDemo runs crffd demo end to end, parses its figures, checks the
// global ATE against the n-weighted mean of the local ones, and checks that
// no process it started is left.
func TestDemo(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts processes through /proc")
	}
	dir := filepath.Join(t.TempDir(), "demo")
	mark := t.TempDir()
	cmd := exec.Command(filepath.Join(testbin.Build(t), "crffd"), "demo", "--dir", dir, "--rows", "300")
	cmd.Env = markedEnv(mark)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("crffd demo: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	stdout := out.String()
	rows := demoSiteRow.FindAllStringSubmatch(stdout, -1)
	if len(rows) != 3 {
		t.Fatalf("%d site rows in the demo's output, want 3:\n%s", len(rows), stdout)
	}
	var sumN, sumATE float64
	for _, r := range rows {
		n, _ := strconv.ParseFloat(r[2], 64)
		ate, _ := strconv.ParseFloat(r[3], 64)
		pehe, _ := strconv.ParseFloat(r[5], 64)
		if n != 300 || math.IsNaN(ate) || !(pehe > 0) {
			t.Errorf("implausible site row %q", r[0])
		}
		sumN += n
		sumATE += n * ate
	}
	g := demoGlobal.FindStringSubmatch(stdout)
	if g == nil {
		t.Fatalf("no global ATE line in:\n%s", stdout)
	}
	global, _ := strconv.ParseFloat(g[1], 64)
	if math.Abs(global-sumATE/sumN) > 1e-3 { // the printed figures have 4 decimals
		t.Errorf("global ATE %v, n-weighted mean of the printed local ATEs %v", global, sumATE/sumN)
	}
	// The acceptance of the doubly robust estimate: the global interval
	// covers the simulated truth of the demo's design.
	lo, _ := strconv.ParseFloat(g[5], 64)
	hi, _ := strconv.ParseFloat(g[6], 64)
	truth, _ := strconv.ParseFloat(g[3], 64)
	if !(lo <= global && global <= hi) || g[7] != "covers" || !(lo <= truth && truth <= hi) {
		t.Errorf("global AIPW interval [%v, %v] around %v, true ATE %v: %s", lo, hi, global, truth, g[0])
	}
	// site3 is the dissimilar site: Δ = 4 pushes nearly all its rows into
	// treatment, which the demo must say.
	for _, want := range []string{"transfer factors λ of the outcome model", "sqlite3 " + filepath.Join(dir, "site1.sqlite"),
		"positivity: site3: "} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if !waitFor(5*time.Second, func() bool { return len(marked(mark)) == 0 }) {
		t.Errorf("processes left after crffd demo: %v", marked(mark))
	}
}

// TestDemoRemovesItsFolder: without --dir or --keep the demo removes the
// folder it made under the temporary folder, and says so.
func TestDemoRemovesItsFolder(t *testing.T) {
	tmp := t.TempDir()
	cmd := exec.Command(filepath.Join(testbin.Build(t), "crffd"), "demo", "--rows", "200")
	cmd.Env = append(markedEnv(t.TempDir()), "TMPDIR="+tmp)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("crffd demo: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	left, err := filepath.Glob(filepath.Join(tmp, "crffd-demo-*"))
	if err != nil || len(left) != 0 {
		t.Errorf("left behind: %v (%v)", left, err)
	}
	if m := regexp.MustCompile(`removed (\S+); crffd demo --keep keeps`).FindStringSubmatch(out.String()); m == nil || filepath.Dir(m[1]) != tmp {
		t.Errorf("the demo does not say it removed its folder under %s:\n%s", tmp, out.String())
	}
	if bytes.Contains(out.Bytes(), []byte("sqlite3 ")) {
		t.Error("the demo suggests queries on files it removed")
	}
}
