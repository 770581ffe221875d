package e2e

import (
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestReport fits one simulated site, writes its report with crffd report
// and checks the page: self-contained, with the figures a fit without a
// federation has (CATEs and propensity overlap), and the notes for what it
// lacks. The crff_overlap view must account for every scored row. When
// Chromium is installed, it renders the page headless and checks that the
// screenshot is not blank.
func TestReport(t *testing.T) {
	dir, cfg := simulateSite(t, 200, smallModel)
	crffd(t, nil, "fit", "--config", cfg).mustSucceed(t)
	path := filepath.Join(dir, "site1.sqlite")

	db := openDB(t, path)
	if n := queryFloat(t, db, "SELECT sum(treated + control) FROM crff_overlap"); n != 200 {
		t.Errorf("crff_overlap counts %v rows, want 200", n)
	}
	if n := queryFloat(t, db, "SELECT count(*) FROM crff_overlap"); n != 10 {
		t.Errorf("crff_overlap has %v buckets, want 10", n)
	}

	out := filepath.Join(dir, "report.html")
	r := crffd(t, nil, "report", "--db", path, "--out", out).mustSucceed(t)
	if !strings.Contains(r.stdout, "report written to "+out) {
		t.Errorf("stdout %q", r.stdout)
	}
	// Said once, not again in the log.
	if n := strings.Count(r.stdout+r.stderr, "report written"); n != 1 {
		t.Errorf("\"report written\" said %d times:\n%s%s", n, r.stdout, r.stderr)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("report mode %v, want owner-only 0600", fi.Mode().Perm())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if n := len(regexp.MustCompile(`<img src="data:image/png;base64,`).FindAllString(page, -1)); n != 4 {
		t.Errorf("report embeds %d images, want 4 (love plot, loss, CATEs, overlap)", n)
	}
	for _, want := range []string{"Training loss per round of 3 models", "No transfer factors", "<td class=\"l\">local</td>",
		"Love plot of ", "The optimiser was",
		"propensity bucket", "The audit log is empty"} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, bad := range []string{"http://", "https://", "<script", "<link"} {
		if strings.Contains(page, bad) {
			t.Errorf("report contains %q: it must load nothing", bad)
		}
	}

	crffd(t, nil, "report", "--out", out).mustFail(t, "--db")
	crffd(t, nil, "report", "--db", path, "--coordinator", path, "--out", out).mustFail(t)

	t.Run("Chromium", func(t *testing.T) { screenshot(t, out) })
}

// screenshot renders the HTML file page in headless Chromium and fails
// when the screenshot looks blank, or lacks the colours of the love plot
// or of either arm of the propensity plot. It skips when Chromium is not
// installed.
func screenshot(t *testing.T, page string) {
	bin := "/usr/bin/chromium"
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("headless Chromium test: %s not installed (apt-get install chromium)", bin)
	}
	shot := filepath.Join(t.TempDir(), "report.png")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--screenshot="+shot, "--window-size=1200,10000", "file://"+page)
	cmd.WaitDelay = 5 * time.Second
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, b)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	bounds := img.Bounds()
	if bounds.Dx() != 1200 || bounds.Dy() != 10000 {
		t.Errorf("screenshot is %v, want 1200×10000", bounds)
	}
	colours := map[[3]uint32]bool{}
	nonWhite := 0
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[[3]uint32{r >> 8, g >> 8, b >> 8}] = true
			if r>>8 < 240 || g>>8 < 240 || b>>8 < 240 {
				nonWhite++
			}
		}
	}
	frac := float64(nonWhite) / float64(bounds.Dx()*bounds.Dy())
	t.Logf("screenshot %s: %d distinct colours, %.1f%% non-white pixels", shot, len(colours), 100*frac)
	if len(colours) < 50 || frac < 0.02 {
		t.Errorf("screenshot looks blank: %d distinct colours, %.2f%% non-white pixels", len(colours), 100*frac)
	}
	// The love plot (orange squares before weighting, sky-blue dots after)
	// and both arms of the propensity plot (vermilion treated, blue
	// control) must be on the page.
	for _, c := range []struct {
		name    string
		r, g, b uint32
	}{
		{"love plot, before weighting", 230, 159, 0}, {"love plot, after weighting", 86, 180, 233},
		{"propensity of the treated rows", 213, 94, 0}, {"propensity of the control rows", 0, 114, 178},
	} {
		n := 0
		for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
			for x := bounds.Min.X; x < bounds.Max.X; x++ {
				r, g, b, _ := img.At(x, y).RGBA()
				if absDiff(r>>8, c.r) <= 12 && absDiff(g>>8, c.g) <= 12 && absDiff(b>>8, c.b) <= 12 {
					n++
				}
			}
		}
		t.Logf("%s: %d pixels", c.name, n)
		if n < 50 {
			t.Errorf("screenshot shows %d pixels of the %s: it is not visible", n, c.name)
		}
	}
	if dir := os.Getenv("CRFFD_SCREENSHOT_DIR"); dir != "" {
		b, err := os.ReadFile(shot)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "report.png"), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestReportFederated runs a small federation over grpc, then reports a
// site file, which now holds the site's loss per round and its transfer
// factors, and the coordinator's state file, which lists the finished run.
func TestReportFederated(t *testing.T) {
	const sites = 3
	dir := sandbox(t, sites, 120, "grpc")
	runFederation(t, dir, sites, true)
	run := checkSiteResults(t, dir, sites)

	path := filepath.Join(dir, "site1.sqlite")
	db := openDB(t, path)
	if n := queryFloat(t, db, "SELECT count(DISTINCT model) FROM crff_loss WHERE run = '"+run+"'"); n != 3 {
		t.Errorf("crff_loss holds the losses of %v models of run %s, want 3", n, run)
	}
	out := filepath.Join(dir, "site1.html")
	crffd(t, nil, "report", "--db", path, "--out", out).mustSucceed(t)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if n := strings.Count(page, `<img src="data:image/png;base64,`); n != 6 {
		t.Errorf("site report embeds %d images, want 6 (local and global love plots, loss, transfer factors, CATEs, overlap)", n)
	}
	for _, want := range []string{"Training loss per round of 3 models", "<td class=\"l\">global</td>",
		`<td class="l">sent</td><td class="l">gradient</td>`, `<th class="l">received</th><th class="l">all</th>`} {
		if !strings.Contains(page, want) {
			t.Errorf("site report lacks %q", want)
		}
	}

	out = filepath.Join(dir, "coordinator.html")
	crffd(t, nil, "report", "--coordinator", filepath.Join(dir, "coordinator.sqlite"), "--out", out).mustSucceed(t)
	if b, err = os.ReadFile(out); err != nil {
		t.Fatal(err)
	}
	if page := string(b); !strings.Contains(page, "<code>"+run+"</code>") || !strings.Contains(page, "No run is in progress") {
		t.Errorf("coordinator report lacks run %s or the note on the cleared state", run)
	}
	// The finished run's transfer matrices, one per model.
	if page := string(b); !strings.Contains(page, "Run <code>"+run+"</code>. Row s, column v") || strings.Count(page, `<img src="data:image/png;base64,`) != 3 {
		t.Errorf("coordinator report lacks the transfer matrices of run %s", run)
	}
	t.Run("Chromium", func(t *testing.T) { screenshot(t, filepath.Join(dir, "site1.html")) })
}

func absDiff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}
