package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/png"
	"math/rand/v2"
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
	if n := len(regexp.MustCompile(`<img src="data:image/png;base64,`).FindAllString(page, -1)); n != 6 {
		t.Errorf("report embeds %d images, want 6 (love plot, loss, CATEs, overlap, GATES, TOC)", n)
	}
	for _, want := range []string{"Training loss per round of 3 models", "No transfer factors", "<td class=\"l\">local</td>",
		"<td class=\"l\">blp_het</td>", "TOC curve at 9 shares",
		"Love plot of ", "The optimiser was Adam, which has no line search", // model.optimizer's default
		"propensity bucket", "The audit log is empty"} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, bad := range []string{"http://", "https://", "<script", "<link", "trial step of its line search"} {
		if strings.Contains(page, bad) {
			t.Errorf("report contains %q", bad)
		}
	}

	crffd(t, nil, "report", "--out", out).mustFail(t, "--db")
	crffd(t, nil, "report", "--db", path, "--coordinator", path, "--out", out).mustFail(t)

	t.Run("Chromium", func(t *testing.T) { screenshot(t, out) })
}

// The colours of the figures' series (report/plots.go, report/balance.go):
// each is used by one series only, so that a pixel check can find it.
var (
	rgbTreated = [3]uint32{213, 94, 0}   // propensity of the treated rows
	rgbControl = [3]uint32{0, 114, 178}  // propensity of the control rows
	rgbBefore  = [3]uint32{230, 159, 0}  // love plot, before weighting
	rgbAfter   = [3]uint32{86, 180, 233} // love plot, after weighting
)

// chromiumShot renders the HTML file page in headless Chromium, 1200
// pixels wide and 10000 high, and returns the screenshot. It skips the
// test when Chromium is not installed.
func chromiumShot(t *testing.T, page string) image.Image {
	t.Helper()
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
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if bounds := img.Bounds(); bounds.Dx() != 1200 || bounds.Dy() != 10000 {
		t.Errorf("screenshot is %v, want 1200×10000", bounds)
	}
	if dir := os.Getenv("CRFFD_SCREENSHOT_DIR"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, t.Name()[:strings.IndexByte(t.Name()+"/", '/')]+".png"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return img
}

// colourBox counts the pixels of img within r of colour c (within 12 in
// every channel: antialiasing and colour management shift a colour a
// little, and the report's colours are further apart than that), and
// returns the smallest rectangle holding them, empty when there is none.
func colourBox(img image.Image, r image.Rectangle, c [3]uint32) (n int, box image.Rectangle) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			if absDiff(cr>>8, c[0]) <= 12 && absDiff(cg>>8, c[1]) <= 12 && absDiff(cb>>8, c[2]) <= 12 {
				n++
				box = box.Union(image.Rect(x, y, x+1, y+1))
			}
		}
	}
	return n, box
}

// screenshot renders the HTML file page in headless Chromium and fails
// when the screenshot looks blank, or lacks the colours of the love plot
// or of either arm of the propensity plot, and returns the screenshot. It
// skips when Chromium is not installed.
func screenshot(t *testing.T, page string) image.Image {
	img := chromiumShot(t, page)
	bounds := img.Bounds()
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
	t.Logf("screenshot: %d distinct colours, %.1f%% non-white pixels", len(colours), 100*frac)
	if len(colours) < 50 || frac < 0.02 {
		t.Errorf("screenshot looks blank: %d distinct colours, %.2f%% non-white pixels", len(colours), 100*frac)
	}
	for _, c := range []struct {
		name string
		rgb  [3]uint32
	}{
		{"love plot, before weighting", rgbBefore}, {"love plot, after weighting", rgbAfter},
		{"propensity of the treated rows", rgbTreated}, {"propensity of the control rows", rgbControl},
	} {
		n, _ := colourBox(img, bounds, c.rgb)
		t.Logf("%s: %d pixels", c.name, n)
		if n < 50 {
			t.Errorf("screenshot shows %d pixels of the %s: it is not visible", n, c.name)
		}
	}
	return img
}

// TestReportMinorityArm fits a site of 975 treated rows and 25 controls
// and checks that its report's propensity figure shows the controls: in
// the PNG embedded in the page, the control rows' bars fill the lower
// panel on a scale of their own, and, when Chromium is installed, the
// rendered page shows them below the treated rows' bars.
func TestReportMinorityArm(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(11, 12))
	var b strings.Builder
	b.WriteString("id,w,y,age,score\n")
	for i := 1; i <= 1000; i++ {
		w := 1
		if i%40 == 0 {
			w = 0
		}
		age, score := 50+10*rng.NormFloat64(), rng.NormFloat64()
		fmt.Fprintf(&b, "%d,%d,%.3f,%.1f,%.3f\n", i, w, score+2*float64(w)+rng.NormFloat64(), age, score)
	}
	csvPath := filepath.Join(dir, "t.csv")
	if err := os.WriteFile(csvPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "t.sqlite")
	crffd(t, nil, "import", "--db", path, "--table", "records", "--csv", csvPath, "--header").mustSucceed(t)
	cfg := filepath.Join(dir, "site.yaml")
	body := "site:\n  name: x\n  db: t.sqlite\n  table: records\n  id_column: id\n  treatment_column: w\n  outcome_column: y\n" + smallModel
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	crffd(t, nil, "fit", "--config", cfg).mustSucceed(t)
	out := filepath.Join(dir, "report.html")
	crffd(t, nil, "report", "--db", path, "--out", out).mustSucceed(t)
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}

	const alt = "Histograms of the propensity of 975 treated rows (upper panel) and 25 control rows (lower panel)"
	m := regexp.MustCompile(`<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="` + regexp.QuoteMeta(alt) + `"`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("report has no figure %q", alt)
	}
	raw, err := base64.StdEncoding.DecodeString(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	fig, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	fb := fig.Bounds()
	part := func(y0, y1 float64) image.Rectangle {
		return image.Rect(fb.Min.X, fb.Min.Y+int(y0*float64(fb.Dy())), fb.Max.X, fb.Min.Y+int(y1*float64(fb.Dy())))
	}
	for _, c := range []struct {
		name    string
		rgb     [3]uint32
		in, out image.Rectangle
		min     int
	}{
		{"treated rows, upper panel", rgbTreated, part(0, 0.5), part(0.5, 1), 500},
		{"control rows, lower panel", rgbControl, part(0.5, 1), part(0, 0.5), 500},
		// On a scale of their own, the controls' tallest bar reaches the
		// upper half of their panel.
		{"control rows' tallest bar", rgbControl, part(0.5, 0.75), image.Rectangle{}, 50},
	} {
		if n, _ := colourBox(fig, c.in, c.rgb); n < c.min {
			t.Errorf("propensity figure: %s: %d pixels of its colour, want at least %d", c.name, n, c.min)
		}
		if n, _ := colourBox(fig, c.out, c.rgb); n > 0 {
			t.Errorf("propensity figure: %s: %d pixels of its colour in the other arm's panel", c.name, n)
		}
	}

	t.Run("Chromium", func(t *testing.T) {
		img := chromiumShot(t, out)
		nt, bt := colourBox(img, img.Bounds(), rgbTreated)
		nc, bc := colourBox(img, img.Bounds(), rgbControl)
		t.Logf("treated rows: %d pixels in %v; control rows: %d pixels in %v", nt, bt, nc, bc)
		if nt < 500 || nc < 500 {
			t.Fatalf("screenshot shows %d pixels of the treated rows' bars and %d of the control rows': an arm is not visible", nt, nc)
		}
		if bc.Min.Y < bt.Max.Y {
			t.Errorf("the control rows' bars (rows %d–%d) are not below the treated rows' (rows %d–%d)", bc.Min.Y, bc.Max.Y, bt.Min.Y, bt.Max.Y)
		}
	})
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
	if n := strings.Count(page, `<img src="data:image/png;base64,`); n != 8 {
		t.Errorf("site report embeds %d images, want 8 (local and global love plots, loss, transfer factors, CATEs, overlap, GATES, TOC)", n)
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
	// The finished run's transfer matrices, one per model, said to be
	// borrowing weights and not site similarities.
	if page := string(b); !strings.Contains(page, "Run <code>"+run+"</code>, one matrix per model.") || strings.Count(page, `<img src="data:image/png;base64,`) != 3 {
		t.Errorf("coordinator report lacks the transfer matrices of run %s", run)
	}
	for _, want := range []string{"how much each site's model borrows from each other site (not site similarity)</h2>",
		"It is not a measure of how alike two sites are"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("coordinator report lacks %q", want)
		}
	}
	if !strings.Contains(page, "how much this site's models borrow from each peer (not site similarity)</h2>") {
		t.Error("site report's transfer factors are not said to be borrowing weights")
	}
	t.Run("Chromium", func(t *testing.T) { screenshot(t, filepath.Join(dir, "site1.html")) })
}

func absDiff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}
