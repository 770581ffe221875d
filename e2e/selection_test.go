package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/selection"
)

// TestFitModelSelection fits with model.estimator and kernel.name auto,
// checks crff_model_selection and what fit prints, then forces the
// T-learner and checks that crffd site applies the kept estimator to rows
// added later.
func TestFitModelSelection(t *testing.T) {
	const small = "  features: 20\n  latent: 3\n  rounds: 30\n  samples: 20\n"
	dir, cfg := simulateSite(t, 300, "model:\n  estimator: auto\n"+small)
	db := openDB(t, filepath.Join(dir, "site1.sqlite"))
	r := crffd(t, []string{"CRFFD_KERNEL_NAME=auto"}, "fit", "--config", cfg).mustSucceed(t)
	if !strings.Contains(r.stdout, "model selection: the mean of ") || !strings.Contains(r.stdout, " of 16 candidates on ") ||
		!strings.Contains(r.stdout, "towards the doubly robust ATE") {
		t.Errorf("fit does not say what model selection chose:\n%s", r.stdout)
	}
	if n := queryFloat(t, db, "SELECT count(*) FROM crff_model_selection"); n != 17 {
		t.Errorf("crff_model_selection has %v rows, want 16 candidates (5 kernels × latent, outcome; 3 penalties × tlearner, dr) and the ensemble", n)
	}
	if n := queryFloat(t, db, "SELECT count(*) FROM crff_model_selection WHERE chosen = 1 AND kind = 'ensemble' AND se IS NULL AND shift IS NOT NULL"); n != 1 {
		t.Errorf("%v ensembles chosen, want 1", n)
	}
	members := queryFloat(t, db, "SELECT count(*) FROM crff_model_selection WHERE member = 1")
	if members < 1 || !strings.Contains(r.stdout, fmt.Sprintf("the mean of %d of 16", int(members))) {
		t.Errorf("%v members in crff_model_selection; fit printed:\n%s", members, r.stdout)
	}
	if n := queryFloat(t, db, "SELECT count(DISTINCT kernel) FROM crff_model_selection"); n != 5 {
		t.Errorf("%v kernels among the candidates, want gaussian, laplacian and matern with nu 0.5, 1.5, 2.5", n)
	}
	// 20% of each arm is held out: about 60 of 300 rows.
	if n := queryFloat(t, db, "SELECT min(n) FROM crff_model_selection"); n < 55 || n > 65 {
		t.Errorf("%v validation rows, want about 60", n)
	}
	// The losses of the chosen candidate's kernel fit: each of the three
	// models once, rounds 1 to at most model.rounds, not five fits mixed.
	if n := queryFloat(t, db, "SELECT count(*) FROM (SELECT model FROM crff_loss GROUP BY model HAVING min(round) = 1 AND max(round) <= 30 AND count(*) = max(round))"); n != 3 {
		t.Errorf("crff_loss holds %v models with one history each, want 3", n)
	}
	if d := queryFloat(t, db, "SELECT diff FROM crff_model_selection WHERE candidate = 'latent/gaussian'"); d != 0 {
		t.Errorf("the reference's difference from itself is %v", d)
	}

	// Forced to the T-learner, with no kernel choice: three penalties.
	b, _ := os.ReadFile(cfg)
	b = bytes.Replace(b, []byte("estimator: auto"), []byte("estimator: tlearner"), 1)
	b = bytes.Replace(b, []byte("  on_invalid: refuse\n"), []byte("  on_invalid: refuse\n  poll_interval: 200ms\n"), 1)
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	crffd(t, nil, "fit", "--config", cfg).mustSucceed(t)
	if n := queryFloat(t, db, "SELECT count(*) FROM crff_model_selection WHERE kind = 'tlearner'"); n != 3 {
		t.Errorf("%v T-learner candidates, want 3", n)
	}
	plugin := queryFloat(t, db, "SELECT ate FROM crff_ate WHERE scope = 'local' AND estimator = 'plugin'")
	if latent := queryFloat(t, db, "SELECT avg(latent_cate) FROM crff_cate"); math.Abs(plugin-latent) < 1e-6 {
		t.Errorf("plug-in ATE %v is the mean latent CATE: the T-learner's CATEs were not used", plugin)
	}

	stderr := startSiteDaemon(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	copyFirstRows(t, ctx, openWriter(t, filepath.Join(dir, "site1.sqlite")))
	deadline := time.Now().Add(15 * time.Second)
	for queryFloat(t, db, "SELECT count(*) FROM crff_cate") < 305 {
		if time.Now().After(deadline) {
			t.Fatalf("new rows not scored within 15 s; crffd site log:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A copy of a row gets the row's CATE, which fit computed with the
	// T-learner: crffd site applied the kept T-learner and its calibration
	// (the latent CATE, calibrated, would differ).
	if d := queryFloat(t, db, `SELECT max(abs(a.cate - b.cate)) FROM crff_cate a JOIN crff_cate b ON b.row_id = a.row_id + 1000`); d > 1e-9 {
		t.Errorf("new copies of rows differ from the rows by %v in their CATE", d)
	}
}

func TestFitSelectionSettingsRefused(t *testing.T) {
	for _, tc := range []struct{ extra, want string }{
		{"model:\n  estimator: forest\n", `model.estimator "forest": want one of auto, latent, outcome, tlearner, dr`},
		{"model:\n  estimator: auto\n  validation: 1.5\n", "model.validation 1.5: want a share of the rows in (0, 1)"},
		{"model:\n  estimator: auto\n  selection_z: -1\n", "model.selection_z -1"},
	} {
		_, cfg := simulateSite(t, 50, tc.extra)
		crffd(t, nil, "fit", "--config", cfg).mustFail(t, tc.want)
	}
}

// TestEvalAutoEmbeddedIHDP runs crffd eval's auto mode on the embedded
// IHDP copy with two kernels, and refuses a malformed kernel list.
func TestEvalAutoEmbeddedIHDP(t *testing.T) {
	r := crffd(t, nil, "eval", "--data", "ihdp", "--replicates", "1", "--sources", "1", "--modes", "auto",
		"--auto-kernels", "gaussian,matern:nu=1.5", "--features", "20", "--latent", "3", "--rounds", "20", "--samples", "10").mustSucceed(t)
	for _, want := range []string{"1 replicates from ihdp", "auto: how often each candidate was a member of the chosen ensemble"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("eval output lacks %q:\n%s", want, r.stdout)
		}
	}
	if !regexp.MustCompile(`(?m)^1 +\S+/\S+ +1 of 1$`).MatchString(r.stdout) {
		t.Errorf("eval output lacks a member counted in 1 of 1 runs:\n%s", r.stdout)
	}
	if !regexp.MustCompile(`(?m)^auto +1 +1 +\d`).MatchString(r.stdout) {
		t.Errorf("eval output lacks the summary row of auto, 1 source, 1 replicate:\n%s", r.stdout)
	}
	// --selection-z 0 leaves the best candidate alone in the ensemble; the
	// default takes more on these 99 held-out rows.
	members := regexp.MustCompile(`(?m)^1 +\S+ +1 of 1$`)
	strict := crffd(t, nil, "eval", "--data", "ihdp", "--replicates", "1", "--sources", "1", "--modes", "auto", "--selection-z", "0",
		"--auto-kernels", "gaussian,matern:nu=1.5", "--features", "20", "--latent", "3", "--rounds", "20", "--samples", "10").mustSucceed(t)
	if n, def := len(members.FindAllString(strict.stdout, -1)), len(members.FindAllString(r.stdout, -1)); n != 1 || def < 2 {
		t.Errorf("%d members with --selection-z 0, %d by default; want 1 and more:\n%s\n%s", n, def, strict.stdout, r.stdout)
	}
	crffd(t, nil, "eval", "--data", "ihdp", "--replicates", "1", "--modes", "auto", "--auto-kernels", "matern:nu").
		mustFail(t, `--auto-kernels "matern:nu": "matern:nu" is not NAME or NAME:PARAM=VALUE`)
	// A grid point through the flag: the Gaussian again at its own D and
	// γ, a candidate of its own.
	grid := crffd(t, nil, "eval", "--data", "ihdp", "--replicates", "1", "--sources", "1", "--modes", "auto", "--json",
		"--auto-kernels", "gaussian,gaussian:features=10:linear=0", "--features", "20", "--latent", "3", "--rounds", "20", "--samples", "10").mustSucceed(t)
	var rep struct {
		Runs []struct {
			Candidates []struct {
				Name string
				Loss float64
			}
		}
	}
	if err := json.Unmarshal([]byte(grid.stdout), &rep); err != nil || len(rep.Runs) != 1 {
		t.Fatalf("eval --json: %v, %d runs:\n%s", err, len(rep.Runs), grid.stdout)
	}
	loss := map[string]float64{}
	for _, c := range rep.Runs[0].Candidates {
		loss[c.Name] = c.Loss
	}
	// Its own name, and its own model: D 10 and γ 0 give another loss.
	plain, okPlain := loss["latent/gaussian"]
	point, okPoint := loss["latent/gaussian(features=10,linear=0)"]
	if _, ok := loss["outcome/gaussian(features=10,linear=0)"]; !okPlain || !okPoint || !ok || plain == point {
		t.Errorf("eval --json with a grid point: candidates' losses %v; want the point's latent and outcome candidates, the latent's loss not the plain Gaussian's", loss)
	}
	crffd(t, nil, "eval", "--data", "ihdp", "--replicates", "1", "--modes", "auto", "--auto-kernels", "gaussian,gaussian:features=0").
		mustFail(t, `--auto-kernels "gaussian:features=0": features="0": want a whole number of random frequencies ≥ 1`)
	crffd(t, nil, "eval", "--data", "ihdp", "--replicates", "1", "--modes", "auto", "--selection-z", "-1").
		mustFail(t, "--selection-z -1: must not be negative")
	crffd(t, nil, "eval", "--data", "ihdp", "--replicates", "1", "--modes", "auto", "--auto-estimator", "forest").
		mustFail(t, `--auto-estimator "forest": want one of auto, latent, outcome, tlearner, dr`)
}

// TestReportWritesNothing: crffd report on a file crffd never used refuses
// it and leaves it as it was (it used to create the crff_ tables).
func TestReportWritesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "plain.sqlite")
	db := openDB(t, path)
	if _, err := db.Exec(`CREATE TABLE patients (id INTEGER PRIMARY KEY, w INTEGER, y REAL)`); err != nil {
		t.Fatal(err)
	}
	crffd(t, nil, "report", "--db", path, "--out", filepath.Join(dir, "r.html")).
		mustFail(t, "it has no crff_ tables; run crffd fit or crffd site on it first")
	if n := queryFloat(t, db, "SELECT count(*) FROM sqlite_schema WHERE name LIKE 'crff%'"); n != 0 {
		t.Errorf("crffd report created %v crff_ objects in a file it only reads", n)
	}
}

// TestFederatedModelSelection runs a coordinator and three site daemons
// over grpc with model.estimator auto: every site publishes the same
// crff_model_selection, equal bit for bit to selection.Run on the same
// rows with the same kernel plugin, its crff_cate holds the chosen
// candidate's CATE, the coordinator prints the winner, and no sentinel
// value planted in the rows crosses the wire in the new stats and losses
// envelopes either.
func TestFederatedModelSelection(t *testing.T) {
	const sites, rows = 3, 120
	dir := sandbox(t, sites, rows, "grpc")
	editFile(t, filepath.Join(dir, "coordinator.yaml"), "model:\n", "model:\n  estimator: auto\n  validation: 0.25\n")
	for k := 1; k <= sites; k++ {
		plant(t, dir, k)
	}
	coord := runFederation(t, dir, sites, true)
	if !strings.Contains(coord.out.String(), "model selection: ") {
		t.Errorf("the coordinator does not say what model selection chose:\n%s", coord.out.String())
	}
	run := checkSiteResults(t, dir, sites)
	if scanCarried(t, dir, sites, func(p string) bool { return strings.HasSuffix(p, ".capture") }, []byte(coord.err.String())) == 0 {
		t.Fatal("nothing carried to scan")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kc, dbs, recs := sandboxRecords(ctx, t, dir, sites)
	var data []*estimator.Data
	var held [][]int
	var cfg estimator.Config
	for k, db := range dbs {
		_, setup, err := modelstore.Load(ctx, db, run, func(context.Context, modelstore.Kernel) (estimator.Spectral, error) { return kc, nil })
		if err != nil {
			t.Fatal(err)
		}
		cfg = setup.Config
		h, err := selection.SiteHoldout(recs[k].Data.W, 0.25, cfg.Seed, federation.DefaultMinArmRows)
		if err != nil {
			t.Fatal(err)
		}
		data, held = append(data, recs[k].Data), append(held, h)
	}
	schema := recs[0].Schema
	want, err := selection.Run(ctx, data, held, schema, cfg, selection.Options{
		Kernels: []selection.Kernel{{Name: "gaussian", Spectral: kc}}, Z: selection.DefaultZ})
	if err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= sites; k++ {
		db := openDB(t, filepath.Join(dir, fmt.Sprintf("site%d.sqlite", k)))
		rs, err := db.Query(`SELECT candidate, loss, COALESCE(se, 0), diff, COALESCE(diff_se, 0), chosen FROM crff_model_selection WHERE run = ? ORDER BY rowid`, run)
		if err != nil {
			t.Fatal(err)
		}
		c := 0
		for ; rs.Next(); c++ {
			var name string
			var loss, se, diff, diffSE float64
			var chosen bool
			if err := rs.Scan(&name, &loss, &se, &diff, &diffSE, &chosen); err != nil {
				t.Fatal(err)
			}
			if c >= len(want.Candidates) {
				break
			}
			w := want.Candidates[c]
			if name != w.Name || loss != w.Loss || se != w.SE || diff != w.Diff || diffSE != w.DiffSE || chosen != w.Chosen {
				t.Errorf("site%d candidate %d: %s %v %v %v %v %v; simulated %s %+v", k, c, name, loss, se, diff, diffSE, chosen, w.Name, w.Score)
			}
		}
		rs.Close()
		if c != len(want.Candidates) {
			t.Errorf("site%d lists %d candidates, simulated %d", k, c, len(want.Candidates))
		}
		// crff_cate.cate is the chosen candidate's CATE, calibrated: its
		// uncalibrated value is not kept, so compare the plug-in ATE, the
		// mean of the uncalibrated CATEs of the site's rows.
		cate, err := want.CATE(ctx, want.Chosen, k-1, data[k-1])
		if err != nil {
			t.Fatal(err)
		}
		mean := 0.0
		for _, v := range cate {
			mean += v / float64(len(cate))
		}
		if got := queryFloat(t, db, `SELECT ate FROM crff_ate WHERE scope = 'local' AND estimator = 'plugin'`); math.Abs(got-mean) > 1e-9*math.Max(1, math.Abs(mean)) {
			t.Errorf("site%d: plug-in ATE %v, mean of the simulated chosen candidate's CATEs %v", k, got, mean)
		}
		for _, kind := range []string{"stats", "losses"} {
			if n := queryFloat(t, db, fmt.Sprintf(`SELECT count(*) FROM crff_audit WHERE kind = '%s'`, kind)); n == 0 {
				t.Errorf("site%d audited no %s envelope", k, kind)
			}
		}
	}
	t.Logf("chosen %s of %d candidates, equal to selection.Run's", want.Candidates[want.Chosen].Name, len(want.Candidates))
}
