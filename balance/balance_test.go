package balance

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// confounded returns n rows of three covariates where only the first, a
// continuous one, drives the treatment (logit e = x0); the
// second is binary and the third continuous, both independent of it.
func confounded(seed uint64, n int) (*mat.Dense, []float64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	x := mat.NewDense(n, 3, nil)
	w := make([]float64, n)
	for i := range n {
		x0 := rng.NormFloat64()
		x.Set(i, 0, x0)
		if rng.Float64() < 0.4 {
			x.Set(i, 1, 1)
		}
		x.Set(i, 2, 3+2*rng.NormFloat64())
		if rng.Float64() < 1/(1+math.Exp(-x0)) {
			w[i] = 1
		}
	}
	return x, w
}

// confoundedReport returns the balance Report of confounded(seed, n),
// its covariates named driver, sex (binary) and age.
func confoundedReport(t *testing.T, seed uint64, n int) Report {
	t.Helper()
	x, w := confounded(seed, n)
	s, err := Of(context.Background(), x, w)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Summarise(s, []string{"driver", "sex", "age"}, []bool{false, true, false}, "w")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestPropensityBinaryCovariate checks the fit against its closed form:
// with one binary covariate the logistic regression's propensity in each
// level is the treated share of that level (the ridge moves it by little
// on 4000 rows).
func TestPropensityBinaryCovariate(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	n := 4000
	x := mat.NewDense(n, 1, nil)
	w := make([]float64, n)
	var rows, treated [2]float64
	for i := range n {
		l := 0
		if rng.Float64() < 0.3 {
			l = 1
			x.Set(i, 0, 1)
		}
		if rng.Float64() < []float64{0.2, 0.7}[l] {
			w[i] = 1
			treated[l]++
		}
		rows[l]++
	}
	p, err := Propensity(context.Background(), x, w)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		l := int(x.At(i, 0))
		if want := treated[l] / rows[l]; math.Abs(p[i]-want) > 2e-3 {
			t.Fatalf("row %d (level %d): propensity %v, want the level's treated share %v", i, l, p[i], want)
		}
	}
}

func TestPropensitySeparated(t *testing.T) {
	// x separates the arms perfectly: the ridge keeps the fit finite.
	x := mat.NewDense(6, 1, []float64{1, 2, 3, 4, 5, 6})
	w := []float64{0, 0, 0, 1, 1, 1}
	p, err := Propensity(context.Background(), x, w)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range p {
		if !(v > 0 && v < 1) || (w[i] == 1) != (v > 0.5) {
			t.Errorf("row %d: propensity %v for treatment %v", i, v, w[i])
		}
	}
}

func TestPropensityErrors(t *testing.T) {
	x := mat.NewDense(3, 1, []float64{1, 2, 3})
	ctx := context.Background()
	if _, err := Propensity(ctx, x, []float64{0, 1}); err == nil || !strings.Contains(err.Error(), "3 rows of covariates, 2 treatments") {
		t.Errorf("short w: %v", err)
	}
	if _, err := Propensity(ctx, x, []float64{0, 2, 1}); err == nil || !strings.Contains(err.Error(), "row 1: treatment 2") {
		t.Errorf("treatment 2: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Propensity(cancelled, x, []float64{0, 1, 1}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestSummariseByHand checks the SMDs and weights of four rows against
// figures worked by hand.
func TestSummariseByHand(t *testing.T) {
	// Control rows x = 0, 2 with e = 0.5, 0.8 (ω = 2, 5); treated
	// x = 2, 4 with e = 0.5, 0.25 (ω = 2, 4). The arms' weights differ,
	// so that a swap of the arms or of weighted and unweighted means shows.
	x := mat.NewDense(4, 1, []float64{0, 2, 2, 4})
	w := []float64{0, 0, 1, 1}
	e := []float64{0.5, 0.8, 0.5, 0.25}
	s, err := Collect(x, w, e)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Summarise(s, []string{"x"}, []bool{false}, "w")
	if err != nil {
		t.Fatal(err)
	}
	c := r.Covariates[0]
	// Means 1 and 3; variances 2 and 2, so SD √2 and SMD 2/√2 = √2.
	// Weighted means (2·0+5·2)/7 = 10/7 and (2·2+4·4)/6 = 10/3, so the
	// weighted SMD is (10/3 − 10/7)/√2 = (40/21)/√2. ESS 7²/29 = 49/29
	// for the controls and 6²/20 = 1.8 for the treated.
	want := []struct {
		name      string
		got, want float64
	}{
		{"control mean", c.Mean[0], 1}, {"treated mean", c.Mean[1], 3}, {"SD", c.SD, math.Sqrt2},
		{"SMD", c.SMD, math.Sqrt2}, {"weighted control mean", c.WMean[0], 10.0 / 7},
		{"weighted treated mean", c.WMean[1], 10.0 / 3}, {"weighted SMD", c.WSMD, 40.0 / 21 / math.Sqrt2},
		{"control ESS", r.ESS[0], 49.0 / 29}, {"treated ESS", r.ESS[1], 1.8},
	}
	for _, w := range want {
		if math.Abs(w.got-w.want) > 1e-12 {
			t.Errorf("%s: %v, want %v", w.name, w.got, w.want)
		}
	}
	if r.Rows != [2]int{2, 2} {
		t.Errorf("rows %v", r.Rows)
	}
}

// TestAgainstTheDesignsTruth compares the SMD and effective sample sizes
// of the simulated design, logit e = x0 with x0 ~ N(0, 1), with their
// true values: SMD 0.9076 (by quadrature: arm means ±0.4132, within-arm
// variance 0.8292) and an ESS of 1/(P(w=1)·E[1/e]) = 2/(1 + e^½) =
// 0.7551 of each arm's rows.
func TestAgainstTheDesignsTruth(t *testing.T) {
	r := confoundedReport(t, 4, 20000)
	smd := r.Covariates[0].SMD
	t.Logf("SMD %.4f (true 0.9076), ESS shares %.4f and %.4f (true 0.7551)", smd, r.ESS[0]/float64(r.Rows[0]), r.ESS[1]/float64(r.Rows[1]))
	if math.Abs(smd-0.9076) > 0.05 {
		t.Errorf("SMD %.4f, true 0.9076", smd)
	}
	for a := range 2 {
		if share := r.ESS[a] / float64(r.Rows[a]); math.Abs(share-0.7551) > 0.03 {
			t.Errorf("arm %d: ESS %.1f of %d rows, a share of %.4f; true 0.7551", a, r.ESS[a], r.Rows[a], share)
		}
	}
}

// TestLargeImbalanceFirstAndWeightingMendsIt is the acceptance at
// the package's level: the covariate that drives the treatment comes first,
// imbalanced, and weighting brings it under the threshold.
func TestLargeImbalanceFirstAndWeightingMendsIt(t *testing.T) {
	r := confoundedReport(t, 3, 3000)
	first := r.Ranked()[0]
	if first.Name != "driver" || math.Abs(first.SMD) < 0.8 {
		t.Fatalf("first covariate %s with SMD %.3f, want driver with |SMD| ≥ 0.8", first.Name, first.SMD)
	}
	if math.Abs(first.WSMD) > Threshold/2 {
		t.Errorf("driver after weighting: SMD %.3f, want |SMD| ≤ %g", first.WSMD, Threshold/2)
	}
	for _, c := range r.Covariates[1:] {
		if math.Abs(c.SMD) > Threshold || math.Abs(c.WSMD) > Threshold {
			t.Errorf("%s: SMD %.3f, weighted %.3f: want both within %g", c.Name, c.SMD, c.WSMD, Threshold)
		}
	}
	if got := r.Imbalanced(false); len(got) != 1 || got[0] != "driver" {
		t.Errorf("imbalanced before weighting: %v", got)
	}
	if got := r.Imbalanced(true); len(got) != 0 {
		t.Errorf("imbalanced after weighting: %v", got)
	}
}

// TestAddEqualsPooled checks that the Sums of three parts add up to those
// of the whole, through the vector a site sends.
func TestAddEqualsPooled(t *testing.T) {
	x, w := confounded(4, 300)
	e, err := Propensity(context.Background(), x, w)
	if err != nil {
		t.Fatal(err)
	}
	// Some propensities outside positivity's bounds, in both arms, so
	// that the Outside counts add too.
	for i := 0; i < len(e); i += 17 {
		e[i] = 0.995
	}
	whole, err := Collect(x, w, e)
	if err != nil {
		t.Fatal(err)
	}
	total := newSums(3)
	for _, part := range [][2]int{{0, 100}, {100, 120}, {120, 300}} {
		s, err := Collect(x.Slice(part[0], part[1], 0, 3), w[part[0]:part[1]], e[part[0]:part[1]])
		if err != nil {
			t.Fatal(err)
		}
		sent, err := FromVector(3, s.Vector())
		if err != nil {
			t.Fatal(err)
		}
		if err := total.Add(sent); err != nil {
			t.Fatal(err)
		}
	}
	a, b := whole.Vector(), total.Vector()
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9*math.Max(1, math.Abs(a[i])) {
			t.Fatalf("number %d: whole %v, parts %v", i, a[i], b[i])
		}
	}
	if whole.Outside[0] == 0 || whole.Outside[1] == 0 {
		t.Errorf("rows outside positivity's bounds per arm %v: the test does not exercise Outside in both", whole.Outside)
	}
}

func TestSumsErrors(t *testing.T) {
	x := mat.NewDense(2, 1, []float64{1, 2})
	good := newSums(1).Vector()
	tests := []struct {
		name string
		err  func() error
		want string
	}{
		{"short propensities", func() error { _, err := Collect(x, []float64{0, 1}, []float64{0.5}); return err }, "2 rows of covariates, 2 treatments, 1 propensities"},
		{"propensity 1 for a control", func() error { _, err := Collect(x, []float64{0, 1}, []float64{1, 0.5}); return err }, "row 0: treatment 0 with propensity 1"},
		{"treatment 3", func() error { _, err := Collect(x, []float64{3, 1}, []float64{0.5, 0.5}); return err }, "row 0: treatment 3"},
		{"add other width", func() error { s := newSums(1); return s.Add(newSums(2)) }, "1 and 2 covariates"},
		{"vector length", func() error { _, err := FromVector(2, good); return err }, "14 numbers for 2 covariates, want 20"},
		{"vector NaN", func() error {
			v := append([]float64(nil), good...)
			v[9] = math.NaN()
			_, err := FromVector(1, v)
			return err
		}, "number 9 of the sums is NaN"},
		{"fractional rows", func() error {
			v := append([]float64(nil), good...)
			v[0], v[1] = 1.5, 2
			_, err := FromVector(1, v)
			return err
		}, "counts of arm 0 are inconsistent"},
		{"weights below rows", func() error {
			v := append([]float64(nil), good...)
			v[4], v[5] = 3, 2
			_, err := FromVector(1, v)
			return err
		}, "counts of arm 1 are inconsistent"},
		{"names", func() error { _, err := Summarise(newSums(2), []string{"a"}, []bool{false, true}, ""); return err }, "2 covariates in the sums, 1 names, 2 types"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestVerdict(t *testing.T) {
	sums := func(rows [2]float64, w, ww [2]float64, outside [2]float64, wsum [2]float64) Sums {
		s := newSums(1)
		s.N, s.W, s.WW, s.Outside = rows, w, ww, outside
		// Means 0 and 0 with variance 1 in both arms.
		for a := range 2 {
			s.SumSq[a][0] = rows[a] - 1
			s.WSum[a][0] = wsum[a]
		}
		return s
	}
	tests := []struct {
		name    string
		s       Sums
		verdict Verdict
		reason  string
	}{
		{"good", sums([2]float64{500, 500}, [2]float64{1000, 1000}, [2]float64{2100, 2100}, [2]float64{}, [2]float64{}), Good, ""},
		{"thin arm", sums([2]float64{990, 10}, [2]float64{1000, 1000}, [2]float64{1100, 1e5}, [2]float64{}, [2]float64{}), Poor, "10 treated rows"},
		{"outside", sums([2]float64{500, 500}, [2]float64{1000, 1000}, [2]float64{2100, 2100}, [2]float64{40, 40}, [2]float64{}), Poor, "80 of 1000 rows (8.0%)"},
		{"uneven weights", sums([2]float64{500, 500}, [2]float64{1000, 1000}, [2]float64{2100, 9000}, [2]float64{}, [2]float64{}), Limited, "the weights leave the treated arm the weight of 111 of its 500 rows"},
		{"left imbalanced", sums([2]float64{500, 500}, [2]float64{1000, 1000}, [2]float64{2100, 2100}, [2]float64{}, [2]float64{0, 300}), Limited, "after weighting, |SMD| > 0.1 for x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Summarise(tc.s, []string{"x"}, []bool{false}, "w")
			if err != nil {
				t.Fatal(err)
			}
			if r.Verdict != tc.verdict || r.Advice == "" {
				t.Fatalf("verdict %q (advice %q), want %q", r.Verdict, r.Advice, tc.verdict)
			}
			if got := strings.Join(r.Reasons, "; "); !strings.Contains(got, tc.reason) {
				t.Errorf("reasons %q, want %q in them", got, tc.reason)
			}
		})
	}
}

func TestSeparatingCovariateRanksFirst(t *testing.T) {
	// b is 0 in every control and 1 in every treated row: its SD is 0 and
	// its SMD undefined, but it is the worst imbalance there is.
	x := mat.NewDense(4, 2, []float64{0.1, 0, 0.4, 0, 0.2, 1, 0.3, 1})
	s, err := Collect(x, []float64{0, 0, 1, 1}, []float64{0.5, 0.5, 0.5, 0.5})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Summarise(s, []string{"a", "b"}, []bool{false, true}, "w")
	if err != nil {
		t.Fatal(err)
	}
	if first := r.Ranked()[0]; first.Name != "b" || !math.IsNaN(first.SMD) {
		t.Errorf("first %s (SMD %v), want b with NaN", first.Name, first.SMD)
	}
}
