package inference

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func TestScoresByHand(t *testing.T) {
	w := []float64{1, 0, 1, 0}
	y := []float64{3, 1, 2, 0.5}
	nu := Nuisance{
		Propensity: []float64{0.5, 0.25, 0.995, 0.001},
		Mu0:        []float64{1, 1.5, 0, 0},
		Mu1:        []float64{2, 2, 1, 1},
	}
	psi, clipped, err := Scores(w, y, nu, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{
		2 - 1 + (3-2)/0.5,          // treated
		2 - 1.5 - (1-1.5)/(1-0.25), // control
		1 - 0 + (2-1)/0.99,         // treated, ê clipped from 0.995 to 0.99
		1 - 0 - (0.5-0)/(1-0.01),   // control, ê clipped from 0.001 to 0.01
	}
	for i := range want {
		if math.Abs(psi[i]-want[i]) > 1e-15 {
			t.Errorf("ψ[%d] = %v, want %v", i, psi[i], want[i])
		}
	}
	if clipped != 2 {
		t.Errorf("clipped %d rows, want 2", clipped)
	}
}

func TestScoresErrors(t *testing.T) {
	ok := Nuisance{Propensity: []float64{0.5, 0.5}, Mu0: []float64{0, 0}, Mu1: []float64{1, 1}}
	for _, tc := range []struct {
		name string
		w, y []float64
		nu   Nuisance
		clip float64
	}{
		{"short outcomes", []float64{0, 1}, []float64{1}, ok, 0.01},
		{"short mu1", []float64{0, 1}, []float64{1, 2}, Nuisance{Propensity: ok.Propensity, Mu0: ok.Mu0, Mu1: []float64{1}}, 0.01},
		{"treatment 2", []float64{0, 2}, []float64{1, 2}, ok, 0.01},
		{"NaN outcome", []float64{0, 1}, []float64{math.NaN(), 2}, ok, 0.01},
		{"propensity above 1", []float64{0, 1}, []float64{1, 2}, Nuisance{Propensity: []float64{0.5, 1.5}, Mu0: ok.Mu0, Mu1: ok.Mu1}, 0.01},
		{"infinite mean", []float64{0, 1}, []float64{1, 2}, Nuisance{Propensity: ok.Propensity, Mu0: []float64{math.Inf(1), 0}, Mu1: ok.Mu1}, 0.01},
		{"clip 0.5", []float64{0, 1}, []float64{1, 2}, ok, 0.5},
		{"unclipped zero propensity", []float64{0, 1}, []float64{1, 2}, Nuisance{Propensity: []float64{0.5, 0}, Mu0: ok.Mu0, Mu1: ok.Mu1}, 0},
	} {
		if _, _, err := Scores(tc.w, tc.y, tc.nu, tc.clip); !errors.Is(err, ErrInput) {
			t.Errorf("%s: error %v, want ErrInput", tc.name, err)
		}
	}
}

func TestSumsAddPooled(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var all []float64
	var total Sums
	for _, n := range []int{3, 50, 1000} {
		v := make([]float64, n)
		for i := range v {
			v[i] = 2 + 3*rng.NormFloat64()
		}
		all = append(all, v...)
		total = total.Add(Accumulate(v))
	}
	got, err := total.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	want, err := Accumulate(all).Estimate()
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got.Estimate-want.Estimate) > 1e-12 || math.Abs(got.SE-want.SE) > 1e-12 || got.N != len(all) {
		t.Errorf("added sums give %+v, pooled rows %+v", got, want)
	}
	// Against the two-pass mean and standard deviation.
	var m, ss float64
	for _, x := range all {
		m += x
	}
	m /= float64(len(all))
	for _, x := range all {
		ss += (x - m) * (x - m)
	}
	se := math.Sqrt(ss / float64(len(all)-1) / float64(len(all)))
	if math.Abs(want.Estimate-m) > 1e-12 || math.Abs(want.SE-se) > 1e-12 {
		t.Errorf("estimate %v ± %v, two-pass %v ± %v", want.Estimate, want.SE, m, se)
	}
	if math.Abs(want.Upper-want.Lower-2*1.959963984540054*se) > 1e-12 {
		t.Errorf("interval %v..%v is not ±1.96 se", want.Lower, want.Upper)
	}
}

// TestNoiseVarWidensTheInterval: noise of variance V in Σψ adds V/n² to
// the squared standard error, NoiseSE is its part, and added Sums add
// their noise variances.
func TestNoiseVarWidensTheInterval(t *testing.T) {
	psi := []float64{1, 3, 2, 5, 4, 0, 2, 3}
	exact, err := Accumulate(psi).Estimate()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []float64{0, 1, 16, 400} {
		s := Accumulate(psi)
		s.NoiseVar = v
		got, err := s.Estimate()
		if err != nil {
			t.Fatal(err)
		}
		n := float64(len(psi))
		if want := math.Sqrt(exact.SE*exact.SE + v/(n*n)); math.Abs(got.SE-want) > 1e-12 || got.Estimate != exact.Estimate ||
			math.Abs(got.NoiseSE-math.Sqrt(v)/n) > 1e-15 || math.Abs(got.Upper-got.Estimate-1.959963984540054*got.SE) > 1e-9 {
			t.Errorf("noise variance %v: %+v, want se %v", v, got, want)
		}
	}
	a, b := Sums{N: 3, Sum: 1, SumSq: 2, NoiseVar: 4}, Sums{N: 5, Sum: 2, SumSq: 3, NoiseVar: 9}
	if got := a.Add(b); got != (Sums{N: 8, Sum: 3, SumSq: 5, NoiseVar: 13}) {
		t.Errorf("added %+v", got)
	}
}

func TestEstimateErrors(t *testing.T) {
	for _, s := range []Sums{{}, {N: 1, Sum: 2, SumSq: 4}, {N: 3, Sum: math.NaN()}, {N: 3, Sum: 1, SumSq: 2, NoiseVar: -1}, {N: 3, NoiseVar: math.Inf(1)}} {
		if _, err := s.Estimate(); !errors.Is(err, ErrInput) {
			t.Errorf("%+v: error %v, want ErrInput", s, err)
		}
	}
}

// design draws n rows of a confounded design with a constant effect tau:
// x ~ N(0,1), e(x) = σ(x), y = 1 + 2x + tau·w + N(0,1). It returns the rows
// and the true nuisances.
func design(rng *rand.Rand, n int, tau float64) (w, y []float64, truth Nuisance, x []float64) {
	w, y, x = make([]float64, n), make([]float64, n), make([]float64, n)
	truth = Nuisance{Propensity: make([]float64, n), Mu0: make([]float64, n), Mu1: make([]float64, n)}
	for i := range n {
		x[i] = rng.NormFloat64()
		e := 1 / (1 + math.Exp(-x[i]))
		if rng.Float64() < e {
			w[i] = 1
		}
		truth.Propensity[i] = e
		truth.Mu0[i] = 1 + 2*x[i]
		truth.Mu1[i] = truth.Mu0[i] + tau
		y[i] = truth.Mu0[i] + tau*w[i] + rng.NormFloat64()
	}
	return w, y, truth, x
}

// TestCoverage checks the interval's coverage over replicates of a design
// with the true nuisances, and with one of them wrong (double robustness).
func TestCoverage(t *testing.T) {
	const reps, n, tau = 1000, 400, 2.0
	for _, tc := range []struct {
		name  string
		wrong func(nu Nuisance, x []float64) Nuisance
	}{
		{"true nuisances", func(nu Nuisance, _ []float64) Nuisance { return nu }},
		{"outcome model wrong", func(nu Nuisance, x []float64) Nuisance {
			// Means that ignore x: the propensity alone must carry the estimate.
			return Nuisance{Propensity: nu.Propensity, Mu0: constant(len(x), 0), Mu1: constant(len(x), 0)}
		}},
		{"propensity wrong", func(nu Nuisance, x []float64) Nuisance {
			return Nuisance{Propensity: constant(len(x), 0.5), Mu0: nu.Mu0, Mu1: nu.Mu1}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 11))
			covered := 0
			var bias float64
			for range reps {
				w, y, truth, x := design(rng, n, tau)
				psi, _, err := Scores(w, y, tc.wrong(truth, x), DefaultClip)
				if err != nil {
					t.Fatal(err)
				}
				e, err := Accumulate(psi).Estimate()
				if err != nil {
					t.Fatal(err)
				}
				if e.Lower <= tau && tau <= e.Upper {
					covered++
				}
				bias += (e.Estimate - tau) / reps
			}
			cov := float64(covered) / reps
			// Binomial standard error of a 95% coverage over 1000 replicates
			// is 0.007; allow four.
			if math.Abs(cov-Level) > 0.028 {
				t.Errorf("coverage %.3f, want %.2f ± 0.028", cov, Level)
			}
			if math.Abs(bias) > 0.03 {
				t.Errorf("mean error %.4f, want |·| ≤ 0.03", bias)
			}
		})
	}
}

func TestCoverageFailsWithoutAdjustment(t *testing.T) {
	// Both nuisances wrong: the estimate is the confounded difference in
	// means, and the interval must miss. This shows TestCoverage can fail.
	rng := rand.New(rand.NewPCG(3, 4))
	w, y, _, x := design(rng, 2000, 2)
	nu := Nuisance{Propensity: constant(len(x), 0.5), Mu0: constant(len(x), 0), Mu1: constant(len(x), 0)}
	psi, _, err := Scores(w, y, nu, DefaultClip)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Accumulate(psi).Estimate()
	if err != nil {
		t.Fatal(err)
	}
	if e.Lower <= 2 && 2 <= e.Upper {
		t.Errorf("unadjusted interval %v..%v covers the true effect 2", e.Lower, e.Upper)
	}
}

func TestFolds(t *testing.T) {
	w := make([]float64, 103)
	for i := range 37 {
		w[i*2] = 1
	}
	fold, err := Folds(w, 5, 9)
	if err != nil {
		t.Fatal(err)
	}
	var count [2][5]int
	for i, f := range fold {
		count[int(w[i])][f]++
	}
	for a, want := range [2]int{66, 37} {
		lo, hi := want/5, (want+4)/5
		for f, c := range count[a] {
			if c < lo || c > hi {
				t.Errorf("arm %d, fold %d: %d rows, want %d..%d", a, f, c, lo, hi)
			}
		}
	}
	again, _ := Folds(w, 5, 9)
	other, _ := Folds(w, 5, 10)
	same, differ := true, false
	for i := range fold {
		same = same && fold[i] == again[i]
		differ = differ || fold[i] != other[i]
	}
	if !same || !differ {
		t.Errorf("folds: same seed equal %v, other seed differs %v; want true, true", same, differ)
	}
	if _, err := Folds(w, 1, 0); !errors.Is(err, ErrInput) {
		t.Errorf("one fold: error %v, want ErrInput", err)
	}
	if _, err := Folds([]float64{0, 0.5}, 2, 0); !errors.Is(err, ErrInput) {
		t.Errorf("treatment 0.5: error %v, want ErrInput", err)
	}
}

func constant(n int, v float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestPlugIn(t *testing.T) {
	e, err := PlugIn([]float64{1, 2, 6})
	if err != nil || e.Estimate != 3 || e.N != 3 || !math.IsNaN(e.SE) || !math.IsNaN(e.Lower) || !math.IsNaN(e.Upper) {
		t.Errorf("PlugIn = %+v, %v", e, err)
	}
	for _, v := range [][]float64{nil, {1, math.Inf(-1)}} {
		if _, err := PlugIn(v); !errors.Is(err, ErrInput) {
			t.Errorf("PlugIn(%v): error %v, want ErrInput", v, err)
		}
	}
}

func TestAnalyse(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2))
	w, y, truth, xs := design(rng, 200, 2)
	x := mat.NewDense(len(xs), 1, xs)
	cate := constant(len(xs), 1.5)
	a, err := Analyse(w, y, truth, cate, x)
	if err != nil {
		t.Fatal(err)
	}
	psi, _, _ := Scores(w, y, truth, DefaultClip)
	want, _ := Accumulate(psi).Estimate()
	if a.AIPW != want || a.Sums != Accumulate(psi) || a.Calibration == nil {
		t.Errorf("Analyse: %+v, want AIPW %+v and a calibration", a, want)
	}
	// Two rows in one covariate are too few for a calibration: none, and
	// no error, since the ATE stands without it.
	small, err := Analyse(w[:2], y[:2], Nuisance{Propensity: truth.Propensity[:2], Mu0: truth.Mu0[:2], Mu1: truth.Mu1[:2]}, cate[:2], mat.NewDense(2, 1, xs[:2]))
	if err != nil || small.Calibration != nil {
		t.Errorf("Analyse of 2 rows: calibration %v, error %v; want none and no error", small.Calibration, err)
	}
	if _, err := Analyse(w, y[:3], truth, cate, x); !errors.Is(err, ErrInput) {
		t.Errorf("short outcomes: error %v, want ErrInput", err)
	}
}

// TestStratified: over three sites of fixed sizes whose means differ (2, 6
// and 6), the stratified standard error matches the estimate's spread over
// replicates, and covers at its level, where the pooled one, which counts
// the spread between the sites' means, is too wide.
func TestStratified(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	means, sizes := []float64{2, 6, 6}, []int{300, 300, 300}
	const reps = 2000
	truth := (2.0 + 6 + 6) / 3
	var est, sq, strat, pooled, covered float64
	for range reps {
		strata := make([]Sums, len(means))
		for k, m := range means {
			v := make([]float64, sizes[k])
			for i := range v {
				v[i] = m + 3*rng.NormFloat64()
			}
			strata[k] = Accumulate(v)
		}
		e, err := Stratified(strata)
		if err != nil {
			t.Fatal(err)
		}
		var all Sums
		for _, s := range strata {
			all = all.Add(s)
		}
		p, err := all.Estimate()
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(e.Estimate-p.Estimate) > 1e-12 {
			t.Fatalf("stratified mean %v, pooled %v", e.Estimate, p.Estimate)
		}
		est += e.Estimate / reps
		sq += (e.Estimate - truth) * (e.Estimate - truth) / reps
		strat += e.SE / reps
		pooled += p.SE / reps
		if e.Lower <= truth && truth <= e.Upper {
			covered++
		}
	}
	sd := math.Sqrt(sq)
	t.Logf("true sd %.4f, stratified se %.4f, pooled se %.4f, coverage %.3f", sd, strat, pooled, covered/reps)
	if math.Abs(strat/sd-1) > 0.05 {
		t.Errorf("stratified se %.4f against the true sd %.4f", strat, sd)
	}
	if pooled/sd < 1.1 {
		t.Errorf("pooled se %.4f against the true sd %.4f: want it about 1.18 times as wide here", pooled, sd)
	}
	if c := covered / reps; c < 0.93 || c > 0.97 {
		t.Errorf("coverage %.3f, want about 0.95", c)
	}
}

// TestStratifiedNoise: a private stratum's noise variance enters the
// standard error as in Estimate, and is taken out of its within sum.
func TestStratifiedNoise(t *testing.T) {
	a := Sums{N: 100, Sum: 210, SumSq: 100*4 + 210*210/100.0}
	b := Sums{N: 50, Sum: 300, SumSq: 50*9 + 300*300/50.0}
	exact, err := Stratified([]Sums{a, b})
	if err != nil {
		t.Fatal(err)
	}
	want := math.Sqrt((100*4 + 50*9) / (150.0 * 148))
	if math.Abs(exact.SE-want) > 1e-12 {
		t.Errorf("se %v, want %v", exact.SE, want)
	}
	// On average over the noise, (Σψ + e)² = (Σψ)² + NoiseVar: feed that.
	b.NoiseVar = 400
	b.Sum = math.Sqrt(b.Sum*b.Sum + b.NoiseVar)
	noisy, err := Stratified([]Sums{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if want := math.Sqrt(want*want + 400/150.0/150); math.Abs(noisy.SE-want) > 1e-12 || math.Abs(noisy.NoiseSE-20/150.0) > 1e-12 {
		t.Errorf("se %v (noise %v), want %v (noise %v)", noisy.SE, noisy.NoiseSE, want, 20/150.0)
	}
	for _, bad := range [][]Sums{{{N: 1, Sum: 1, SumSq: 1}}, {{N: 3, Sum: math.NaN()}}, {{N: 3, NoiseVar: -1}}, {{N: -1}}} {
		if _, err := Stratified(bad); !errors.Is(err, ErrInput) {
			t.Errorf("%+v: %v, want ErrInput", bad, err)
		}
	}
}

// TestControlScores: Γ0 + ψ is the treated arm's score μ̂1 + w(y − μ̂1)/ê,
// and a clipped propensity is clipped in both.
func TestControlScores(t *testing.T) {
	w := []float64{1, 0, 1, 0}
	y := []float64{3, 1, 2, 5}
	nu := Nuisance{Propensity: []float64{0.5, 0.2, 0.001, 0.999}, Mu0: []float64{1, 2, 0, 1}, Mu1: []float64{2, 2, 1, 3}}
	psi, _, err := Scores(w, y, nu, DefaultClip)
	if err != nil {
		t.Fatal(err)
	}
	g0, err := ControlScores(w, y, nu, DefaultClip)
	if err != nil {
		t.Fatal(err)
	}
	for i := range w {
		e := min(max(nu.Propensity[i], DefaultClip), 1-DefaultClip)
		g1 := nu.Mu1[i] + w[i]*(y[i]-nu.Mu1[i])/e
		if math.Abs(g0[i]+psi[i]-g1) > 1e-12 {
			t.Errorf("row %d: Γ0 %v + ψ %v, want Γ1 %v", i, g0[i], psi[i], g1)
		}
	}
	if _, err := ControlScores(w[:3], y, nu, DefaultClip); !errors.Is(err, ErrInput) {
		t.Errorf("3 treatments for 4 rows: %v, want ErrInput", err)
	}
}
