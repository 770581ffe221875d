package evaluate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/crffd/crffd/dataset"
	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/synth"
)

func TestParseList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  bool
	}{
		{"1-10", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, false},
		{"1,2,3", []int{1, 2, 3}, false},
		{"1-3, 7", []int{1, 2, 3, 7}, false},
		{"4", []int{4}, false},
		{"0", nil, true},
		{"3-1", nil, true},
		{"a", nil, true},
		{"1,,2", nil, true},
		{"-2", nil, true},
	} {
		got, err := ParseList(tc.in)
		if (err != nil) != tc.err || (!tc.err && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("ParseList(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestParseSeeds(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []uint64
		err  string
	}{
		{"0-3", []uint64{0, 1, 2, 3}, ""},
		{"0", []uint64{0}, ""},
		{"2,5", []uint64{2, 5}, ""},
		{"-1", nil, `"-1" is not a non-negative integer or range`},
		{"3-1", nil, `"3-1" is not a range LOW-HIGH`},
		{"x", nil, `"x" is not a non-negative integer or range`},
	} {
		got, err := ParseSeeds(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSeeds(%q): err = %v, want it to contain %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseSeeds(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func touch(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFindReplicates(t *testing.T) {
	dir := t.TempDir()
	touch(t, dir, "ihdp_npci_10.csv", "ihdp_npci_2.csv", "ihdp_npci_1.csv", "notes.txt")
	all, err := FindReplicates(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var nums []int
	for _, r := range all {
		nums = append(nums, r.Number)
	}
	if !reflect.DeepEqual(nums, []int{1, 2, 10}) {
		t.Errorf("numbers = %v, want [1 2 10] in numeric order", nums)
	}
	sel, err := FindReplicates(dir, []int{10, 1})
	if err != nil || len(sel) != 2 || sel[0].Number != 10 || filepath.Base(sel[1].Path) != "ihdp_npci_1.csv" {
		t.Errorf("selection = %v, %v", sel, err)
	}
	if _, err := FindReplicates(dir, []int{3}); err == nil || !strings.Contains(err.Error(), "no file for replicate 3") {
		t.Errorf("missing replicate: err = %v", err)
	}
	one, err := FindReplicates(filepath.Join(dir, "ihdp_npci_2.csv"), nil)
	if err != nil || len(one) != 1 || one[0].Number != 2 {
		t.Errorf("single file = %v, %v", one, err)
	}
	if _, err := FindReplicates(filepath.Join(dir, "absent"), nil); err == nil {
		t.Error("missing path: no error")
	}
	empty := t.TempDir()
	if _, err := FindReplicates(empty, nil); err == nil || !strings.Contains(err.Error(), "no .csv files") {
		t.Errorf("empty dir: err = %v", err)
	}
	dup := t.TempDir()
	touch(t, dup, "a_1.csv", "b_1.csv")
	if _, err := FindReplicates(dup, nil); err == nil || !strings.Contains(err.Error(), "both replicate 1") {
		t.Errorf("duplicate numbers: err = %v", err)
	}
}

func TestMeanSE(t *testing.T) {
	m, se := meanSE([]float64{1, 2, 3, 4})
	// sd = sqrt(5/3), se = sd/2
	if m != 2.5 || math.Abs(se-math.Sqrt(5.0/3)/2) > 1e-15 {
		t.Errorf("meanSE = %v, %v", m, se)
	}
	if m, se := meanSE([]float64{7}); m != 7 || se != 0 {
		t.Errorf("one value: %v, %v", m, se)
	}
}

func TestPlanErrors(t *testing.T) {
	base := Plan{
		Replicates: []Replicate{{Number: 1, Path: "x.csv"}}, Sources: []int{1, 2}, SourceSize: 10,
		Split: [3]int{4, 3, 3}, Modes: []string{"learned"}, TestSource: 1, Spectral: estimator.GaussianSpectral{},
	}
	for _, tc := range []struct {
		name   string
		change func(p *Plan)
		want   string
	}{
		{"split sum", func(p *Plan) { p.Split = [3]int{4, 3, 2} }, "does not add up to the source size 10"},
		{"no test rows", func(p *Plan) { p.Split = [3]int{7, 0, 3} }, "at least 2 training and 1 test row"},
		{"test source beyond k", func(p *Plan) { p.TestSource = 2 }, "test source 2 is not among the first 1 sources"},
		{"unknown mode", func(p *Plan) { p.Modes = []string{"pooled"} }, `unknown mode "pooled"`},
		{"no kernel", func(p *Plan) { p.Spectral = nil }, "no kernel"},
	} {
		p := base
		tc.change(&p)
		_, err := Run(context.Background(), p)
		if !errors.Is(err, ErrPlan) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrPlan containing %q", tc.name, err, tc.want)
		}
	}
}

// writeSynth writes a small two-source synthetic replicate and returns its path.
func writeSynth(t *testing.T, dir string, replicate int, seed uint64) string {
	t.Helper()
	return writeDesign(t, dir, synth.Design{Sources: 2, Rows: 200, Seed: seed}, replicate)
}

// writeDesign writes design d as replicate replicate's file in dir.
func writeDesign(t *testing.T, dir string, d synth.Design, replicate int) string {
	t.Helper()
	tables, err := synth.Generate(d)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := dataset.Concat(tables...)
	path := filepath.Join(dir, fmt.Sprintf("synth_%d.csv", replicate))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := dataset.Write(f, all); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRunSeeds checks that Plan.Seeds repeats every run with each seed,
// that the seed reaches the fit, and that the summary averages each
// replicate over its seeds before taking the standard error over the
// replicates.
func TestRunSeeds(t *testing.T) {
	dir := t.TempDir()
	reps := []Replicate{{Number: 1, Path: writeSynth(t, dir, 1, 3)}, {Number: 2, Path: writeSynth(t, dir, 2, 4)}}
	cfg := estimator.DefaultConfig()
	cfg.Features, cfg.Latent, cfg.Rounds, cfg.Samples = 50, 3, 10, 10
	rep, err := Run(context.Background(), Plan{
		Replicates: reps, Sources: []int{2}, SourceSize: 200, Split: [3]int{100, 60, 40},
		Modes: []string{"full"}, TestSource: 1, Spectral: estimator.GaussianSpectral{}, Config: cfg,
		Seeds: []uint64{5, 9},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 4 {
		t.Fatalf("%d runs, want 2 replicates × 2 seeds", len(rep.Runs))
	}
	var perRep []float64
	for i := 0; i < 4; i += 2 {
		a, b := rep.Runs[i], rep.Runs[i+1]
		if a.Replicate != b.Replicate || a.Seed != 5 || b.Seed != 9 {
			t.Fatalf("runs %d and %d: replicate %d seed %d, replicate %d seed %d; want one replicate, seeds 5 and 9", i, i+1, a.Replicate, a.Seed, b.Replicate, b.Seed)
		}
		if a.SqrtPEHE == b.SqrtPEHE {
			t.Errorf("replicate %d: seeds 5 and 9 gave the same sqrt(PEHE) %v; the seed did not reach the fit", a.Replicate, a.SqrtPEHE)
		}
		perRep = append(perRep, (a.SqrtPEHE+b.SqrtPEHE)/2)
	}
	if len(rep.Summary) != 1 {
		t.Fatalf("%d summaries, want 1", len(rep.Summary))
	}
	s := rep.Summary[0]
	mean := (perRep[0] + perRep[1]) / 2
	se := math.Abs(perRep[0]-perRep[1]) / 2 // sd/√2 of two values
	if s.N != 2 || s.Seeds != 2 || math.Abs(s.SqrtPEHEMean-mean) > 1e-12 || math.Abs(s.SqrtPEHESE-se) > 1e-12 {
		t.Errorf("summary %+v; want n 2, seeds 2, mean %v, se %v", s, mean, se)
	}
}

// TestRunSmall runs a small plan end to end on synthetic data and checks
// the report's shape, the summary against the runs, and that the T-learner
// recovers the effect of an easy design.
func TestRunSmall(t *testing.T) {
	path := writeSynth(t, t.TempDir(), 1, 3)
	cfg := estimator.DefaultConfig()
	cfg.Features, cfg.Latent, cfg.Rounds, cfg.Samples = 100, 3, 20, 10
	var calls int
	rep, err := Run(context.Background(), Plan{
		Replicates: []Replicate{{Number: 1, Path: path}}, Sources: []int{1, 2}, SourceSize: 200, Split: [3]int{100, 60, 40},
		Modes: []string{"full", "tlearner"}, TestSource: 1, Spectral: estimator.GaussianSpectral{}, Config: cfg,
		Progress: func(done, total int, r Result) {
			calls++
			if total != 4 || done != calls {
				t.Errorf("progress %d/%d at call %d", done, total, calls)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 4 || len(rep.Summary) != 4 || calls != 4 {
		t.Fatalf("%d runs, %d summaries, %d progress calls; want 4 each", len(rep.Runs), len(rep.Summary), calls)
	}
	for i, s := range rep.Summary {
		r := rep.Runs[i]
		if s.Mode != r.Mode || s.Sources != r.Sources || s.N != 1 || s.SqrtPEHEMean != r.SqrtPEHE || s.ATEErrMean != r.ATEErr {
			t.Errorf("summary %+v does not match its single run %+v", s, r)
		}
		if !(r.SqrtPEHE >= r.ATEErr) {
			t.Errorf("%+v: sqrt(PEHE) below the ATE error, impossible by Jensen", r)
		}
		if r.Mode == "full" && r.Rounds == 0 {
			t.Errorf("%+v: no rounds counted", r)
		}
		// ATEErr is |ATE − ATETrue|; only the CausalRFF modes have the
		// doubly robust figures, and an interval holds its estimate.
		if math.Abs(math.Abs(r.ATE-r.ATETrue)-r.ATEErr) > 1e-12 {
			t.Errorf("%+v: ATE error is not |ate − ate_true|", r)
		}
		hasAIPW := r.AIPWATE != nil && r.DRSqrtPEHE != nil && r.CATECoverage != nil
		if hasAIPW != (r.Mode == "full") {
			t.Errorf("%+v: AIPW figures present %v", r, hasAIPW)
		}
		if hasAIPW && !(*r.AIPWLower < *r.AIPWATE && *r.AIPWATE < *r.AIPWUpper && *r.CATECoverage >= 0 && *r.CATECoverage <= 1) {
			t.Errorf("%+v: AIPW %v not inside [%v, %v], or CATE coverage %v", r, *r.AIPWATE, *r.AIPWLower, *r.AIPWUpper, *r.CATECoverage)
		}
	}
	// Runs are deterministic: a second evaluation gives the same errors.
	again, err := Run(context.Background(), Plan{
		Replicates: []Replicate{{Number: 1, Path: path}}, Sources: []int{1, 2}, SourceSize: 200, Split: [3]int{100, 60, 40},
		Modes: []string{"full", "tlearner"}, TestSource: 1, Spectral: estimator.GaussianSpectral{}, Config: cfg,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range rep.Runs {
		a, b := rep.Runs[i], again.Runs[i]
		if a.SqrtPEHE != b.SqrtPEHE || a.ATEErr != b.ATEErr || a.Rounds != b.Rounds {
			t.Errorf("run %d differs on a rerun: %+v vs %+v", i, a, b)
		}
	}
}

// TestSummariseInference checks the doubly robust figures of a summary
// against runs made by hand: two replicates, one of them with two seeds.
func TestSummariseInference(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	run := func(rep int, seed uint64, aipw, lo, hi, dr, cover, width float64) Result {
		return Result{Replicate: rep, Mode: "learned", Sources: 1, Seed: seed, ATETrue: 2, ATE: 1.5,
			AIPWATE: f(aipw), AIPWLower: f(lo), AIPWUpper: f(hi), DRSqrtPEHE: f(dr), CATECoverage: f(cover), CATEWidth: f(width)}
	}
	runs := []Result{
		run(1, 0, 2.1, 1.9, 2.3, 0.2, 0.9, 1), // covers
		run(1, 1, 2.5, 2.2, 2.8, 0.4, 0.7, 3), // misses
		run(2, 0, 1.8, 1.7, 1.9, 0.3, 1.0, 2), // misses
		{Replicate: 1, Mode: "tlearner", Sources: 1, ATETrue: 2, ATE: 2.2},
	}
	s := summarise(runs, []string{"learned", "tlearner"}, []int{1}, 2)
	if len(s) != 2 {
		t.Fatalf("%d summaries, want 2", len(s))
	}
	l := s[0]
	// Replicate 1 averages its seeds: error (0.1+0.5)/2, coverage 1/2.
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"aipw_ate_err_mean", *l.AIPWATEErrMean, (0.3 + 0.2) / 2},
		{"aipw_bias_mean", *l.AIPWBiasMean, (0.3 - 0.2) / 2},
		{"aipw_coverage", *l.AIPWCoverage, (0.5 + 0) / 2},
		{"aipw_width_mean", *l.AIPWWidthMean, (0.5 + 0.2) / 2},
		{"dr_sqrt_pehe_mean", *l.DRSqrtPEHEMean, (0.3 + 0.3) / 2},
		{"cate_coverage", *l.CATECoverage, (0.8 + 1.0) / 2},
		{"cate_width_mean", *l.CATEWidthMean, (2 + 2) / 2},
		{"ate_bias_mean", l.ATEBiasMean, -0.5},
	} {
		if math.Abs(c.got-c.want) > 1e-12 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if tl := s[1]; tl.AIPWATEErrMean != nil || tl.CATECoverage != nil || math.Abs(tl.ATEBiasMean-0.2) > 1e-12 {
		t.Errorf("tlearner summary %+v: want no AIPW figures and bias 0.2", tl)
	}
	// A run too small for a calibration has the AIPW figures only: the
	// calibrated CATE's figures average over the runs that have them.
	noDR := run(3, 0, 2.0, 1.5, 2.5, 0, 0, 0)
	noDR.DRSqrtPEHE, noDR.CATECoverage, noDR.CATEWidth = nil, nil, nil
	s = summarise(append(runs[:3:3], noDR), []string{"learned"}, []int{1}, 2)
	if l := s[0]; l.N != 3 || math.Abs(*l.AIPWCoverage-(0.5+0+1)/3) > 1e-12 || math.Abs(*l.DRSqrtPEHEMean-0.3) > 1e-12 {
		t.Errorf("summary with a run without a calibration: %+v", l)
	}
}

// TestRunCrossFit checks that Plan.CrossFit takes the AIPW estimate from
// nuisances cross-fitted on the scored rows, exactly as a site computes it.
func TestRunCrossFit(t *testing.T) {
	path := writeSynth(t, t.TempDir(), 1, 3)
	cfg := estimator.DefaultConfig()
	cfg.Features, cfg.Latent, cfg.Rounds, cfg.Samples = 40, 3, 15, 10
	plan := Plan{
		Replicates: []Replicate{{Number: 1, Path: path}}, Sources: []int{1}, SourceSize: 200, Split: [3]int{100, 100, 0},
		Modes: []string{"none"}, TestSource: 1, Spectral: estimator.GaussianSpectral{}, Config: cfg,
	}
	split, err := Run(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	plan.CrossFit = true
	cross, err := Run(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	// The same computation by hand.
	splits, schema, err := load(Replicate{Path: path}, plan)
	if err != nil {
		t.Fatal(err)
	}
	c := cfg
	c.Transfer = estimator.NoTransfer
	m, err := estimator.Fit(context.Background(), []*estimator.Data{splits[0].train.Data()}, schema, estimator.GaussianSpectral{}, c)
	if err != nil {
		t.Fatal(err)
	}
	d := splits[0].test.Data()
	nu, err := estimator.CrossFit(context.Background(), m.Setup, 0, d)
	if err != nil {
		t.Fatal(err)
	}
	an, err := inference.Analyse(d.W, d.Y, nu, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, other := cross.Runs[0], split.Runs[0]
	if *got.AIPWATE != an.AIPW.Estimate || *got.AIPWUpper != an.AIPW.Upper {
		t.Errorf("cross-fitted AIPW %v [.., %v], by hand %+v", *got.AIPWATE, *got.AIPWUpper, an.AIPW)
	}
	if *got.AIPWATE == *other.AIPWATE || got.SqrtPEHE != other.SqrtPEHE {
		t.Errorf("cross-fitted AIPW %v, split %v: want them to differ, and the CATE (%v, %v) not to", *got.AIPWATE, *other.AIPWATE, got.SqrtPEHE, other.SqrtPEHE)
	}
}

// TestReportedFiguresAgainstTruth compares what a site reports, computed as
// crffd fit computes it (Plan.CrossFit: nuisances cross-fitted on the
// scored rows), with the truth of simple simulated designs: the AIPW ATE
// and its interval, and the calibrated CATE and its per-row intervals.
func TestReportedFiguresAgainstTruth(t *testing.T) {
	cfg := estimator.DefaultConfig()
	cfg.Features, cfg.Latent, cfg.Rounds, cfg.Samples, cfg.LearningRate = 50, 5, 150, 20, 0.02
	for _, design := range []string{synth.DesignLinearConstant, synth.DesignLinearVarying} {
		t.Run(design, func(t *testing.T) {
			dir := t.TempDir()
			var reps []Replicate
			for r := 1; r <= 8; r++ {
				reps = append(reps, Replicate{Number: r, Path: writeDesign(t, dir, synth.Design{Name: design, Sources: 1, Rows: 1000, Seed: uint64(100 + r)}, r)})
			}
			rep, err := Run(context.Background(), Plan{
				Replicates: reps, Sources: []int{1}, SourceSize: 1000, Split: [3]int{500, 500, 0},
				Modes: []string{"learned"}, TestSource: 1, Spectral: estimator.GaussianSpectral{}, Config: cfg, CrossFit: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			s := rep.Summary[0]
			t.Logf("AIPW error %.3f, bias %+.3f, coverage %.2f, width %.3f; calibrated CATE sqrt(PEHE) %.3f (latent %.3f), coverage %.2f, width %.3f",
				*s.AIPWATEErrMean, *s.AIPWBiasMean, *s.AIPWCoverage, *s.AIPWWidthMean, *s.DRSqrtPEHEMean, s.SqrtPEHEMean, *s.CATECoverage, *s.CATEWidthMean)
			if *s.AIPWCoverage < 0.75 || *s.AIPWATEErrMean > 0.2 || math.Abs(*s.AIPWBiasMean) > 0.15 {
				t.Errorf("AIPW ATE: coverage %.2f, mean error %.3f, bias %+.3f; want ≥ 0.75, ≤ 0.2 and within ±0.15",
					*s.AIPWCoverage, *s.AIPWATEErrMean, *s.AIPWBiasMean)
			}
			if *s.CATECoverage < 0.7 || *s.DRSqrtPEHEMean >= s.SqrtPEHEMean || *s.DRSqrtPEHEMean > 0.6 {
				t.Errorf("calibrated CATE: coverage %.2f, sqrt(PEHE) %.3f against the latent CATE's %.3f; want ≥ 0.7, below the latent's and ≤ 0.6",
					*s.CATECoverage, *s.DRSqrtPEHEMean, s.SqrtPEHEMean)
			}
			// The heterogeneity tests: the BLP rejects a constant effect
			// rarely and finds a varying one, whose AUTOC is positive.
			if s.BLPRejection == nil {
				t.Fatal("no heterogeneity figures")
			}
			t.Logf("BLP rejects %.2f, GATES coverage %.2f (worst fifth %.2f), AUTOC coverage %.2f (%.3f, true ranking %.3f), policy coverage %.2f",
				*s.BLPRejection, *s.GATESCoverage, *s.GATESWorst, *s.AUTOCCoverage, *s.AUTOCMean, *s.AUTOCBestMean, *s.PolicyCoverage)
			if *s.GATESWorst < 0.6 {
				t.Errorf("the worst fifth of τ̂ covers %.2f of 8 replicates", *s.GATESWorst)
			}
			varying := design == synth.DesignLinearVarying
			if varying && (*s.BLPRejection < 0.75 || *s.AUTOCMean <= 0) || !varying && *s.BLPRejection > 0.25 || *s.GATESCoverage < 0.7 {
				t.Errorf("BLP rejects %.2f of %s, AUTOC %.3f, GATES coverage %.2f", *s.BLPRejection, design, *s.AUTOCMean, *s.GATESCoverage)
			}
		})
	}
}

// TestRunAuto runs the auto mode and checks that the run reports its
// chosen candidate's errors, and that the test rows play no part in the
// choice: changing their outcomes leaves every validation loss as it was.
func TestRunAuto(t *testing.T) {
	dir := t.TempDir()
	path := writeDesign(t, dir, synth.Design{Name: synth.DesignLinearVarying, Sources: 2, Rows: 200, Seed: 4}, 1)
	cfg := estimator.DefaultConfig()
	cfg.Features, cfg.Latent, cfg.Rounds, cfg.Samples = 30, 3, 20, 10
	plan := Plan{
		Replicates: []Replicate{{Number: 1, Path: path}}, Sources: []int{2}, SourceSize: 200, Split: [3]int{100, 60, 40},
		Modes: []string{"auto"}, TestSource: 1, Spectral: estimator.GaussianSpectral{}, Config: cfg,
	}
	run := func() Result {
		rep, err := Run(context.Background(), plan)
		if err != nil {
			t.Fatal(err)
		}
		return rep.Runs[0]
	}
	a := run()
	var chosen *Candidate
	var members []string
	for i, c := range a.Candidates {
		if c.Chosen {
			chosen = &a.Candidates[i]
		}
		if c.Member {
			members = append(members, c.Name)
		}
	}
	// Eight candidates and the ensemble, which the run names by its members.
	if len(a.Candidates) != 9 || chosen == nil || chosen.Name != "ensemble" || a.Chosen != strings.Join(members, " + ") ||
		len(members) == 0 || chosen.SqrtPEHE != a.SqrtPEHE || chosen.LossSE != nil {
		t.Fatalf("auto run: chosen %q among %d candidates (want 9), sqrt(PEHE) %v; chosen candidate %+v", a.Chosen, len(a.Candidates), a.SqrtPEHE, chosen)
	}

	tab, err := dataset.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 100; i < 160; i++ { // the test rows of source 1
		tab.Y[i] = 10 * tab.Y[i]
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := dataset.Write(f, tab); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b := run()
	for i := range a.Candidates {
		if a.Candidates[i].Loss != b.Candidates[i].Loss || a.Candidates[i].Diff != b.Candidates[i].Diff {
			t.Errorf("%s: validation loss %v, %v with other test outcomes", a.Candidates[i].Name, a.Candidates[i].Loss, b.Candidates[i].Loss)
		}
	}
	if a.Chosen != b.Chosen {
		t.Errorf("chose %s, then %s with other test outcomes", a.Chosen, b.Chosen)
	}
}

// TestAutoAgainstTruth checks the auto mode's CATE against the truth of
// the linear-varying design, where the latent CATE is attenuated (docs/benchmarks.md:
// √PEHE 0.796 for learned, 0.264 for auto at the default settings): over
// three replicates the chosen ensemble must be clearly closer to the true
// effects than the reference latent CATE, and its mean to the true ATE.
func TestAutoAgainstTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("fits five models per replicate")
	}
	dir := t.TempDir()
	var reps []Replicate
	for r := 1; r <= 3; r++ {
		reps = append(reps, Replicate{Number: r, Path: writeDesign(t, dir, synth.Design{Name: synth.DesignLinearVarying, Sources: 1, Rows: 1000, Seed: uint64(200 + r)}, r)})
	}
	cfg := estimator.DefaultConfig()
	cfg.Features, cfg.Latent, cfg.Rounds, cfg.Samples = 50, 5, 150, 20
	rep, err := Run(context.Background(), Plan{
		Replicates: reps, Sources: []int{1}, SourceSize: 1000, Split: [3]int{500, 250, 250},
		Modes: []string{"auto", "learned"}, TestSource: 1, Spectral: estimator.GaussianSpectral{}, Config: cfg,
	})
	if err != nil {
		t.Fatal(err)
	}
	auto, learned := rep.Summary[0], rep.Summary[1]
	for _, r := range rep.Runs {
		t.Logf("replicate %d %s: sqrt(PEHE) %.3f %s", r.Replicate, r.Mode, r.SqrtPEHE, r.Chosen)
	}
	if !(auto.SqrtPEHEMean < 0.8*learned.SqrtPEHEMean) {
		t.Errorf("auto sqrt(PEHE) %.3f, learned %.3f: selection did not find the better CATE", auto.SqrtPEHEMean, learned.SqrtPEHEMean)
	}
	// The ensemble's mean CATE is near the true ATE (2), where the latent
	// CATE's is not. Here its members do it (the shift is 0 in these
	// runs); selection's TestShiftTowardsTruth checks the shift alone.
	t.Logf("ATE error: auto %.3f (bias %+.3f), learned %.3f (bias %+.3f)", auto.ATEErrMean, auto.ATEBiasMean, learned.ATEErrMean, learned.ATEBiasMean)
	if !(auto.ATEErrMean < 0.2 && auto.ATEErrMean < learned.ATEErrMean/2) {
		t.Errorf("auto ATE error %.3f, learned %.3f: want below 0.2 and below half of learned's", auto.ATEErrMean, learned.ATEErrMean)
	}
}
