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
	"syscall"
	"testing"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/heterogeneity"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/internal/testbin"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/plugins/kernels"
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
	r := crffd(t, []string{"CRFFD_KERNEL_NAME=auto", "CRFFD_SITE_POLICY_THRESHOLDS=0,1.5"}, "fit", "--config", cfg).mustSucceed(t)
	if !strings.Contains(r.stdout, "model selection: the mean of ") || !strings.Contains(r.stdout, " of 16 candidates on ") ||
		!strings.Contains(r.stdout, "towards the doubly robust ATE") {
		t.Errorf("fit does not say what model selection chose:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "heterogeneity on ") || !strings.Contains(r.stdout, "(crff_heterogeneity)") {
		t.Errorf("fit does not print its heterogeneity test:\n%s", r.stdout)
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
	// The heterogeneity tests (issue 35) on the held-out rows: the BLP,
	// five GATES and their spread, the RATE, ten TOC points; CLAN of every
	// covariate; the two default policies.
	if n := queryFloat(t, db, "SELECT count(*) FROM crff_heterogeneity WHERE scope = 'local' AND n > 0 AND lower <= estimate AND estimate <= upper"); n != 2+6+2+9 {
		t.Errorf("crff_heterogeneity has %v rows, want 19", n)
	}
	if n := queryFloat(t, db, "SELECT count(*) FROM crff_heterogeneity WHERE statistic = 'blp_het' AND p_value BETWEEN 0 AND 1"); n != 1 {
		t.Errorf("blp_het with a p-value: %v rows", n)
	}
	if n := queryFloat(t, db, `SELECT sum(n) FROM crff_heterogeneity WHERE statistic IN ('gates_1', 'gates_2', 'gates_3', 'gates_4', 'gates_5')`); n < 55 || n > 65 {
		t.Errorf("the GATES cover %v rows, want the about 60 held out", n)
	}
	if n, m := queryFloat(t, db, "SELECT count(*) FROM crff_clan"), queryFloat(t, db, "SELECT count(*) FROM pragma_table_info('records')"); n < 1 || n > m {
		t.Errorf("crff_clan has %v rows for a table of %v columns", n, m)
	}
	if n := queryFloat(t, db, "SELECT count(*) FROM crff_policy WHERE policy IN ('cate_lower_above_0', 'cate_above_0', 'cate_above_1.5') AND treats BETWEEN 0 AND 1"); n != 3 {
		t.Errorf("crff_policy has %v of the three rules (site.policy_thresholds 0 and 1.5)", n)
	}
	if a, b := queryFloat(t, db, "SELECT treats FROM crff_policy WHERE policy = 'cate_above_0'"), queryFloat(t, db, "SELECT treats FROM crff_policy WHERE policy = 'cate_above_1.5'"); b > a {
		t.Errorf("the rule of threshold 1.5 treats %v of the rows, more than that of 0 (%v)", b, a)
	}
	crffd(t, []string{"CRFFD_SITE_POLICY_THRESHOLDS=0,x"}, "fit", "--config", cfg).mustFail(t, `site.policy_thresholds: "x" is not a number`)
	// The losses of the chosen candidate's kernel fit: each of the three
	// models once, rounds 1 to at most model.rounds, not five fits mixed.
	if n := queryFloat(t, db, "SELECT count(*) FROM (SELECT model FROM crff_loss GROUP BY model HAVING min(round) = 1 AND max(round) <= 30 AND count(*) = max(round))"); n != 3 {
		t.Errorf("crff_loss holds %v models with one history each, want 3", n)
	}
	if d := queryFloat(t, db, "SELECT diff FROM crff_model_selection WHERE candidate = 'latent/gaussian'"); d != 0 {
		t.Errorf("the reference's difference from itself is %v", d)
	}
	// The super learner's choice of the AIPW's nuisance models: per model,
	// the GLM and random-feature learners with weights summing to 1, and
	// the stack, whose loss is no more than either learner's.
	if n := queryFloat(t, db, `SELECT count(*) FROM crff_nuisance`); n != 9 {
		t.Errorf("crff_nuisance has %v rows, want 3 models × (glm, rff, stack)", n)
	}
	// The propensity's loss is over every training row (the held-out rows
	// choose no weight), each arm's outcome's over that arm's.
	train := 300 - queryFloat(t, db, "SELECT min(n) FROM crff_model_selection")
	if n := queryFloat(t, db, `SELECT (SELECT n FROM crff_nuisance WHERE model = 'propensity' AND learner = 'stack') * 10 +
		(SELECT n FROM crff_nuisance WHERE model = 'mu0' AND learner = 'stack') + (SELECT n FROM crff_nuisance WHERE model = 'mu1' AND learner = 'stack')`); n != 11*train || train < 200 {
		t.Errorf("crff_nuisance's row counts give %v, want %v for the propensity and %v over the two arms", n, train, train)
	}
	for _, model := range []string{"propensity", "mu0", "mu1"} {
		if w := queryFloat(t, db, `SELECT sum(weight) FROM crff_nuisance WHERE model = '`+model+`'`); math.Abs(w-1) > 1e-12 {
			t.Errorf("the %s learners' weights sum to %v", model, w)
		}
		if d := queryFloat(t, db, `SELECT (SELECT loss FROM crff_nuisance WHERE model = '`+model+`' AND learner = 'stack') -
			(SELECT min(loss) FROM crff_nuisance WHERE model = '`+model+`' AND learner <> 'stack')`); d > 1e-12 {
			t.Errorf("the %s stack's loss exceeds a learner's by %v", model, d)
		}
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

// TestFitKernelGrid: kernel.grid adds the first kernel at other D and γ
// as candidates of their own, whose models differ from the kernel's.
func TestFitKernelGrid(t *testing.T) {
	dir, cfg := simulateSite(t, 200, "model:\n  features: 20\n  latent: 3\n  rounds: 30\n  samples: 20\n  estimator: latent\n")
	r := crffd(t, []string{"CRFFD_KERNEL_GRID=features=10:linear=0,linear=0"}, "fit", "--config", cfg).mustSucceed(t)
	db := openDB(t, filepath.Join(dir, "site1.sqlite"))
	var names []string
	rs, err := db.Query(`SELECT candidate, kernel, loss FROM crff_model_selection WHERE kind = 'latent' ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	losses := map[float64]bool{}
	for rs.Next() {
		var name, kernel string
		var loss float64
		if err := rs.Scan(&name, &kernel, &loss); err != nil {
			t.Fatal(err)
		}
		names, losses[loss] = append(names, name+" "+kernel), true
	}
	rs.Close()
	want := []string{"latent/gaussian gaussian", "latent/gaussian(features=10,linear=0) gaussian(features=10,linear=0)", "latent/gaussian(linear=0) gaussian(linear=0)"}
	if strings.Join(names, "; ") != strings.Join(want, "; ") || len(losses) != 3 {
		t.Errorf("latent candidates %q with %d distinct losses; want %q, each its own model\n%s", names, len(losses), want, r.stdout)
	}
	crffd(t, []string{"CRFFD_KERNEL_GRID=nu=2"}, "fit", "--config", cfg).mustFail(t, `kernel.grid "nu=2": "nu=2" is not features=N, linear=G or transfer=T`)
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
	// --selection-z 0 leaves the best candidate alone in the ensemble; a
	// wide --selection-z 4 takes more on these 99 held-out rows.
	members := regexp.MustCompile(`(?m)^1 +\S+ +1 of 1$`)
	withZ := func(z string) string {
		return crffd(t, nil, "eval", "--data", "ihdp", "--replicates", "1", "--sources", "1", "--modes", "auto", "--selection-z", z,
			"--auto-kernels", "gaussian,matern:nu=1.5", "--features", "20", "--latent", "3", "--rounds", "20", "--samples", "10").mustSucceed(t).stdout
	}
	strict, wide := withZ("0"), withZ("4")
	if n, w := len(members.FindAllString(strict, -1)), len(members.FindAllString(wide, -1)); n != 1 || w < 2 {
		t.Errorf("%d members with --selection-z 0, %d with 4; want 1 and more:\n%s\n%s", n, w, strict, wide)
	}
	// auto reports the AIPW and calibrated-CATE figures of its ensemble.
	if !regexp.MustCompile(`(?m)^auto +1 +\d+\.\d+ ± \d+\.\d+ +[+-]\d`).MatchString(r.stdout) {
		t.Errorf("eval output lacks auto's doubly robust figures:\n%s", r.stdout)
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
	editFile(t, filepath.Join(dir, "coordinator.yaml"), "model:\n", "model:\n  estimator: auto\n  validation: 0.25\n  selection_by_site: false\n")
	for k := 1; k <= sites; k++ {
		plant(t, dir, k)
	}
	checkFederatedSelection(t, dir, sites, nil, selection.DefaultZ, []modelstore.Kernel{{Name: "gaussian"}}, false, federation.DefaultMinArmRows)
}

// TestFederatedModelSelectionBySite: the same with
// model.selection_by_site, site3's treated outcomes lowered by 12 so that
// it is unlike the others: every site's published choice and CATEs equal
// selection.Run's with BySite, bit for bit. Its effect, below 0, has its
// rule treat none of its held-out rows, so that the run pools the policy
// value too (checkGlobalHeterogeneity).
func TestFederatedModelSelectionBySite(t *testing.T) {
	const sites, rows = 3, 120
	dir := sandbox(t, sites, rows, "grpc")
	editFile(t, filepath.Join(dir, "coordinator.yaml"), "model:\n", "model:\n  estimator: auto\n  validation: 0.25\n  selection_by_site: true\n")
	db := openDB(t, filepath.Join(dir, "site3.sqlite"))
	if _, err := db.Exec(`UPDATE records SET y = y - 12 WHERE w = 1`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for k := 1; k <= sites; k++ {
		plant(t, dir, k)
	}
	checkFederatedSelection(t, dir, sites, nil, selection.DefaultZ, []modelstore.Kernel{{Name: "gaussian"}}, true, federation.DefaultMinArmRows)
}

// TestFederatedNoTransferCandidate: with kernel.grid [transfer=none] at
// the coordinator, every site also trains its kernel's models with no
// transfer (each site on its own rows), and their CATEs are candidates:
// the run chooses as selection.Run does with that grid point, bit for
// bit, and the sites, which have the Gaussian alone, keep and reload the
// models their members need.
func TestFederatedNoTransferCandidate(t *testing.T) {
	const sites, rows = 3, 120
	dir := sandbox(t, sites, rows, "grpc")
	editFile(t, filepath.Join(dir, "coordinator.yaml"), "model:\n", "model:\n  estimator: auto\n  validation: 0.25\n  selection_z: 100\n  selection_by_site: false\n")
	editFile(t, filepath.Join(dir, "coordinator.yaml"), "kernel:\n  name: gaussian\n", "kernel:\n  name: gaussian\n  grid: [transfer=none]\n")
	for k := 1; k <= sites; k++ {
		plant(t, dir, k)
	}
	none := modelstore.Kernel{Name: "gaussian", GridPoint: selection.GridPoint{Transfer: "none"}}
	if saved := checkFederatedSelection(t, dir, sites, nil, 100, []modelstore.Kernel{{Name: "gaussian"}, none}, false, federation.DefaultMinArmRows); saved != 2 {
		t.Errorf("the sites saved the models of %d kernels: want both, each a member's", saved)
	}
}

// TestFederatedKernelChoice: with kernel.name auto at the coordinator and
// the sites, every site trains every installed kernel's models, and the
// run chooses among all their candidates as selection.Run does over the
// same kernels; the published ensemble's models, reloaded, give its CATE.
// A site that trains its own kernel alone refuses such a run, and the
// coordinator says why.
func TestFederatedKernelChoice(t *testing.T) {
	const sites, rows = 2, 120
	dir := sandbox(t, sites, rows, "grpc")
	auto := func(file string) {
		editFile(t, filepath.Join(dir, file), "kernel:\n  name: gaussian\n", "kernel:\n  name: auto\n")
	}
	auto("coordinator.yaml")
	// The latent candidates alone, each a member, so that the sites must
	// save every kernel's models.
	editFile(t, filepath.Join(dir, "coordinator.yaml"), "model:\n", "model:\n  estimator: latent\n  validation: 0.25\n  selection_z: 100\n  selection_by_site: false\n")

	for k := 1; k <= sites; k++ {
		plant(t, dir, k)
	}
	// site2 keeps kernel.name gaussian: it refuses.
	auto("site1.yaml")
	d1 := startDaemon(t, "site1", "site", "--config", filepath.Join(dir, "site1.yaml"), "--once")
	d2 := startDaemon(t, "site2", "site", "--config", filepath.Join(dir, "site2.yaml"), "--once")
	coord := startDaemon(t, "coordinator", "coordinator", "--config", filepath.Join(dir, "coordinator.yaml"), "--once")
	for _, c := range []struct {
		d    *daemon
		want string
	}{{coord, "site2 refused the run: it cannot train a kernel the run chooses among"}, {d2, "trains its own alone"}} {
		if code := c.d.wait(t, 2*time.Minute); code != exitRunFailed || !strings.Contains(c.d.err.String(), c.want) {
			t.Errorf("%s exited %d, want %d and %q\nstderr:\n%s", c.d.name, code, exitRunFailed, c.want, c.d.err.String())
		}
	}
	// site1 may not have reached the coordinator before the run ended.
	_ = d1.cmd.Process.Signal(syscall.SIGTERM)
	d1.wait(t, time.Minute)

	auto("site2.yaml")
	matern := func(nu float64) modelstore.Kernel {
		return modelstore.Kernel{Name: "matern", Params: map[string]float64{"nu": nu}}
	}
	saved := checkFederatedSelection(t, dir, sites, []string{selection.KindLatent}, 100,
		[]modelstore.Kernel{{Name: "gaussian"}, {Name: "laplacian"}, matern(0.5), matern(1.5), matern(2.5)}, false, federation.DefaultMinArmRows)
	if saved != 5 {
		t.Errorf("the sites saved the models of %d kernels: want all 5, each a member's", saved)
	}
	// The loss history names each kernel's models.
	db := openDB(t, filepath.Join(dir, "site1.sqlite"))
	if n := queryFloat(t, db, `SELECT count(DISTINCT model) FROM crff_loss`); n != 15 {
		t.Errorf("crff_loss holds %v models, want 3 of each of 5 kernels", n)
	}
	if n := queryFloat(t, db, `SELECT count(*) FROM crff_loss WHERE model = 'latent (matern(nu=0.5))'`); n == 0 {
		t.Error("crff_loss does not name the latent model of matern(nu=0.5)")
	}

	// A coordinator of one other kernel: the sites train it, not the
	// Gaussian, and save it as the run's.
	editFile(t, filepath.Join(dir, "coordinator.yaml"), "kernel:\n  name: auto\n", "kernel:\n  name: laplacian\n")
	runFederation(t, dir, sites, true)
	run := checkSiteResults(t, dir, sites)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, dbs, _ := sandboxRecords(ctx, t, dir, sites)
	for k, db := range dbs {
		_, setup, err := modelstore.Load(ctx, db, run, kernelOpener(t))
		if err != nil || setup.Kernel.Name != "laplacian" {
			t.Errorf("site%d saved run %s with kernel %+v (%v), want the coordinator's laplacian", k+1, run, setup.Kernel, err)
		}
	}
}

// checkFederatedSelection runs the federation of dir, whose coordinator
// selects a model among the candidates of kinds (nil: all) and kernels
// (the first the run's) with threshold z (and, with bySite, a choice per
// site),
// whose rows have sentinels planted (plant), and checks that every site's
// crff_model_selection lists the candidates selection.Run scores on the
// same rows, with the same scores bit for bit; that the site's plug-in ATE
// is the mean of the chosen ensemble's CATEs, and so is that of the models
// it saved; that the coordinator prints the winner; and that no sentinel
// crossed the wire. It returns the number of kernels whose models site1
// saved.
func checkFederatedSelection(t *testing.T, dir string, sites int, kinds []string, z float64, kernelList []modelstore.Kernel, bySite bool, minArm int) int {
	t.Helper()
	coord := runFederation(t, dir, sites, true)
	if !strings.Contains(coord.out.String(), "model selection: ") {
		t.Errorf("the coordinator does not say what model selection chose:\n%s", coord.out.String())
	}
	run := checkSiteResults(t, dir, sites)
	if scanCarried(t, dir, sites, func(p string) bool { return strings.HasSuffix(p, ".capture") }, []byte(coord.err.String())) == 0 {
		t.Fatal("nothing carried to scan")
	}
	// Each site tests its CATE's heterogeneity on its own held-out rows
	// (issue 35), and keeps the figures to itself.
	for k := 1; k <= sites; k++ {
		db := openDB(t, filepath.Join(dir, fmt.Sprintf("site%d.sqlite", k)))
		if n := queryFloat(t, db, "SELECT count(*) FROM crff_heterogeneity WHERE scope = 'local' AND statistic IN ('blp_het', 'gates_5', 'autoc')"); n != 3 {
			t.Errorf("site%d: %v of blp_het, gates_5 and autoc in crff_heterogeneity", k, n)
		}
		if n := queryFloat(t, db, "SELECT count(*) FROM crff_policy WHERE scope = 'local'"); n != 2 {
			t.Errorf("site%d: %v policies in crff_policy, want 2", k, n)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, dbs, recs := sandboxRecords(ctx, t, dir, sites)
	open := kernelOpener(t)
	opt := selection.Options{Z: z, Kinds: kinds, BySite: bySite}
	for _, k := range kernelList {
		sp, err := open(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		opt.Kernels = append(opt.Kernels, selection.Kernel{Name: label(k), Spectral: sp, GridPoint: k.GridPoint})
	}
	var data []*estimator.Data
	var held [][]int
	var cfg estimator.Config
	saved := make([][]*estimator.Model, sites)
	ests := make([]selection.Estimator, sites)
	for k, db := range dbs {
		models, setup, err := modelstore.LoadAll(ctx, db, run, open)
		if err != nil {
			t.Fatal(err)
		}
		saved[k], ests[k], cfg = models, *setup.Estimator, setup.Config
		h, err := selection.SiteHoldout(recs[k].Data.W, 0.25, cfg.Seed, minArm)
		if err != nil {
			t.Fatal(err)
		}
		data, held = append(data, recs[k].Data), append(held, h)
	}
	want, err := selection.Run(ctx, data, held, recs[0].Schema, cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	checkGlobalHeterogeneity(t, dir, held, minArm)
	if bySite {
		own := 0
		for s := range sites {
			if want.Ensemble.Sites[s].Members != nil {
				own++
			}
			t.Logf("site%d: members %v (the federation's %v)", s+1, want.Ensemble.SiteMembers(s), want.Ensemble.Members)
		}
		if own == 0 {
			t.Error("no site chose members of its own: the run does not test the choice per site")
		}
	}
	for k := 1; k <= sites; k++ {
		db := openDB(t, filepath.Join(dir, fmt.Sprintf("site%d.sqlite", k)))
		if bySite {
			// Each site's own scores: the simulated ones, in its view.
			sc, err := want.SiteScores(k - 1)
			if err != nil {
				t.Fatal(err)
			}
			rs, err := db.Query(`SELECT site_diff, site_diff_se, own_diff, own_diff_se FROM crff_model_selection
				WHERE run = ? AND kind != 'ensemble' ORDER BY rowid`, run)
			if err != nil {
				t.Fatal(err)
			}
			c := 0
			for ; rs.Next(); c++ {
				var d, dse, o, ose float64
				if err := rs.Scan(&d, &dse, &o, &ose); err != nil {
					t.Fatal(err)
				}
				if c < len(sc.Diff) && (d != sc.Diff[c] || dse != sc.DiffSE[c] || o != sc.Own[c] || ose != sc.OwnSE[c]) {
					t.Errorf("site%d candidate %d: site_diff %v ± %v, own %v ± %v; simulated %v ± %v, own %v ± %v",
						k, c, d, dse, o, ose, sc.Diff[c], sc.DiffSE[c], sc.Own[c], sc.OwnSE[c])
				}
			}
			rs.Close()
			if c != len(sc.Diff) {
				t.Errorf("site%d: %d candidates with site scores, want %d", k, c, len(sc.Diff))
			}
		}
		rs, err := db.Query(`SELECT candidate, COALESCE(kernel, ''), loss, COALESCE(se, 0), diff, COALESCE(diff_se, 0), chosen FROM crff_model_selection WHERE run = ? ORDER BY rowid`, run)
		if err != nil {
			t.Fatal(err)
		}
		c := 0
		for ; rs.Next(); c++ {
			var name, kernel string
			var loss, se, diff, diffSE float64
			var chosen bool
			if err := rs.Scan(&name, &kernel, &loss, &se, &diff, &diffSE, &chosen); err != nil {
				t.Fatal(err)
			}
			if c >= len(want.Candidates) {
				break
			}
			w := want.Candidates[c]
			wantKernel := ""
			if w.Kind == selection.KindLatent || w.Kind == selection.KindOutcome {
				wantKernel = opt.Kernels[w.Kernel].Name
			}
			if name != w.Name || kernel != wantKernel || loss != w.Loss || se != w.SE || diff != w.Diff || diffSE != w.DiffSE || chosen != w.Chosen {
				t.Errorf("site%d candidate %d: %s (%s) %v %v %v %v %v; simulated %s (%s) %+v", k, c, name, kernel, loss, se, diff, diffSE, chosen, w.Name, wantKernel, w.Score)
			}
		}
		rs.Close()
		if c != len(want.Candidates) {
			t.Errorf("site%d lists %d candidates, simulated %d", k, c, len(want.Candidates))
		}
		// crff_cate.cate is the chosen candidate's CATE, calibrated: its
		// uncalibrated value is not kept, so compare the plug-in ATE, the
		// mean of the uncalibrated CATEs of the site's rows, with the
		// simulated selection's and with the saved models'.
		cate, err := want.CATE(ctx, want.Chosen, k-1, data[k-1])
		if err != nil {
			t.Fatal(err)
		}
		kept, err := ests[k-1].CATEModels(ctx, saved[k-1], k-1, data[k-1], nil)
		if err != nil {
			t.Fatal(err)
		}
		got := queryFloat(t, db, `SELECT ate FROM crff_ate WHERE scope = 'local' AND estimator = 'plugin'`)
		for _, c := range []struct {
			name string
			cate []float64
		}{{"the simulated chosen candidate's", cate}, {"the saved models'", kept}} {
			mean := 0.0
			for _, v := range c.cate {
				mean += v / float64(len(c.cate))
			}
			if math.Abs(got-mean) > 1e-9*math.Max(1, math.Abs(mean)) {
				t.Errorf("site%d: plug-in ATE %v, mean of %s CATEs %v", k, got, c.name, mean)
			}
		}
		for _, kind := range []string{"stats", "losses"} {
			if n := queryFloat(t, db, fmt.Sprintf(`SELECT count(*) FROM crff_audit WHERE kind = '%s'`, kind)); n == 0 {
				t.Errorf("site%d audited no %s envelope", k, kind)
			}
		}
	}
	var members []string
	for _, c := range want.Candidates {
		if c.Member {
			members = append(members, c.Name)
		}
	}
	t.Logf("chose the mean of %v of %d candidates, equal to selection.Run's; saved models of %d kernels", members, len(want.Candidates)-1, len(saved[0]))
	return len(saved[0])
}

// label names a kernel as crffd's candidate names do: matern(nu=0.5).
func label(k modelstore.Kernel) string {
	var parts []string
	if len(k.Params) > 0 {
		parts = append(parts, kernels.Params(k.Params).String())
	}
	if k.Transfer != "" {
		parts = append(parts, "transfer="+k.Transfer)
	}
	if len(parts) == 0 {
		return k.Name
	}
	return fmt.Sprintf("%s(%s)", k.Name, strings.Join(parts, ","))
}

// kernelOpener opens kernel plugins for modelstore, each closed at the
// end of the test.
func kernelOpener(t *testing.T) modelstore.SpectralFunc {
	return func(ctx context.Context, k modelstore.Kernel) (estimator.Spectral, error) {
		c, err := kernels.Open(ctx, kernels.Options{Dir: testbin.Build(t), Name: k.Name, Params: k.Params})
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { c.Close() })
		return c, nil
	}
}

// checkGlobalHeterogeneity checks the global rows of every site's
// crff_heterogeneity and crff_policy against the same statistics of the
// sites' held-out rows (held, positions in each site's rows, which are
// crff_cate's in row order) pooled: the BLP from raw_cate and psi, and
// the rule cate_lower_above_0's share and gains from lower and psi, to
// 1e-9. The rule's row is absent when some site's held-out rows fall 1 to
// 2·minArm − 1 on either side of it (minArm: the sites'
// federation.min_arm_rows).
func checkGlobalHeterogeneity(t *testing.T, dir string, held [][]int, minArm int) {
	t.Helper()
	var psi, cate []float64
	var treat []bool
	small := false
	for k, h := range held {
		db := openDB(t, filepath.Join(dir, fmt.Sprintf("site%d.sqlite", k+1)))
		rows, err := db.Query(`SELECT raw_cate, psi, lower FROM crff_cate ORDER BY row_id`)
		if err != nil {
			t.Fatal(err)
		}
		var all [3][]float64
		for rows.Next() {
			var c, p, l float64
			if err := rows.Scan(&c, &p, &l); err != nil {
				t.Fatal(err)
			}
			all[0], all[1], all[2] = append(all[0], c), append(all[1], p), append(all[2], l)
		}
		rows.Close()
		treated := 0
		for _, i := range h {
			cate, psi, treat = append(cate, all[0][i]), append(psi, all[1][i]), append(treat, all[2][i] > 0)
			if all[2][i] > 0 {
				treated++
			}
		}
		for _, part := range []int{treated, len(h) - treated} {
			small = small || part > 0 && part < 2*minArm
		}
		t.Logf("site%d: the rule treats %d of %d held-out rows", k+1, treated, len(h))
	}
	sums, err := heterogeneity.NewBLPSums(psi, cate, 0)
	if err != nil {
		t.Fatal(err)
	}
	blp, err := sums.BLP()
	if err != nil {
		t.Fatal(err)
	}
	pol, err := heterogeneity.NewPolicy(nil, psi, treat)
	if err != nil {
		t.Fatal(err)
	}
	// GATES, the RATE and the TOC of the sites' buckets: the same rows at
	// every site, the fifths over every held-out row (their equality with
	// the pooled buckets' is TestGlobalHeterogeneity's).
	// With few buckets a fifth may hold none, and the run then pools
	// none of these (two sites of 30 held-out rows, in buckets of 10).
	var ranked string
	for k := range held {
		db := openDB(t, filepath.Join(dir, fmt.Sprintf("site%d.sqlite", k+1)))
		var rows string
		if err := db.QueryRow(`SELECT COALESCE(group_concat(statistic || '=' || estimate || '±' || se, ' '), '') FROM (SELECT * FROM crff_heterogeneity
			WHERE scope = 'global' AND statistic NOT LIKE 'blp%' ORDER BY statistic)`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(rows, "="); n != 17 && n != 0 || k > 0 && rows != ranked {
			t.Errorf("site%d: global ranked statistics %s; site1's %s", k+1, rows, ranked)
		}
		if rows != "" {
			if n := queryFloat(t, db, "SELECT sum(n) FROM crff_heterogeneity WHERE scope = 'global' AND statistic IN ('gates_1', 'gates_2', 'gates_3', 'gates_4', 'gates_5')"); int(n) != len(psi) {
				t.Errorf("site%d: the global fifths hold %v rows, want the %d held out", k+1, n, len(psi))
			}
		}
		ranked = rows
	}
	if len(held) >= 3 && ranked == "" {
		t.Errorf("three sites pooled no GATES, RATE or TOC")
	}
	for k := range held {
		db := openDB(t, filepath.Join(dir, fmt.Sprintf("site%d.sqlite", k+1)))
		for _, w := range []struct {
			stat string
			e    inference.Estimate
			p    float64
		}{{"blp_ate", blp.ATE, -1}, {"blp_het", blp.Het, blp.HetP}} {
			var est, se, p float64
			var n int
			if err := db.QueryRow(`SELECT estimate, se, COALESCE(p_value, -1), n FROM crff_heterogeneity WHERE scope = 'global' AND statistic = ?`, w.stat).Scan(&est, &se, &p, &n); err != nil {
				t.Fatalf("site%d: global %s: %v", k+1, w.stat, err)
			}
			if math.Abs(est-w.e.Estimate) > 1e-9 || math.Abs(se-w.e.SE) > 1e-9 || math.Abs(p-w.p) > 1e-9 || n != len(psi) {
				t.Errorf("site%d: global %s %v ± %v (p %v, n %d); the pooled held-out rows' %+v (p %v)", k+1, w.stat, est, se, p, n, w.e, w.p)
			}
		}
		var treats, none, noneSE, all, allSE float64
		err := db.QueryRow(`SELECT treats, gain_none, gain_none_se, gain_all, gain_all_se FROM crff_policy WHERE scope = 'global' AND policy = 'cate_lower_above_0'`).Scan(&treats, &none, &noneSE, &all, &allSE)
		switch {
		case small && err == nil:
			t.Errorf("site%d: a global policy value although a site's rule leaves a small part", k+1)
		case !small && err != nil:
			t.Errorf("site%d: global policy value: %v", k+1, err)
		case !small && (treats != pol.Share || math.Abs(none-pol.GainOverNone.Estimate) > 1e-9 || math.Abs(noneSE-pol.GainOverNone.SE) > 1e-9 ||
			math.Abs(all-pol.GainOverAll.Estimate) > 1e-9 || math.Abs(allSE-pol.GainOverAll.SE) > 1e-9):
			t.Errorf("site%d: global policy treats %v, gains %v ± %v and %v ± %v; the pooled held-out rows' %+v", k+1, treats, none, noneSE, all, allSE, pol)
		}
	}
	t.Logf("global BLP loading %.3f ± %.3f (p %.2g) over %d held-out rows; a site's small part keeps the policy local: %v", blp.Het.Estimate, blp.Het.SE, blp.HetP, len(psi), small)
}
