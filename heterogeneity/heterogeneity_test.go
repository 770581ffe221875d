package heterogeneity

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/inference"
)

// draw returns n rows with x ~ N(0, 1), a true effect tau(x), an estimate
// τ̂ = τ + N(0, noise²) fitted elsewhere, and scores ψ = τ + N(0, sd²)
// whose spread grows with |x|, as AIPW scores' does where overlap thins.
func draw(r *rand.Rand, n int, tau func(x float64) float64, noise, sd float64) (x, truth, cate, psi []float64) {
	x, truth, cate, psi = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range n {
		x[i] = r.NormFloat64()
		truth[i] = tau(x[i])
		cate[i] = truth[i] + noise*r.NormFloat64()
		psi[i] = truth[i] + sd*(1+0.5*math.Abs(x[i]))*r.NormFloat64()
	}
	return x, truth, cate, psi
}

// TestBLPSumsAreTheRegression: the BLP from sums equals the least-squares
// fit of ψ on [1, τ̂ − τ̄] with HC1 standard errors computed on the rows,
// and sums of two parts add up to the whole's.
func TestBLPSumsAreTheRegression(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	_, _, cate, psi := draw(r, 300, func(x float64) float64 { return 2 + x }, 0.5, 2)
	s, err := NewBLPSums(psi, cate, 1.7)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.BLP()
	if err != nil {
		t.Fatal(err)
	}
	// The regression on the rows.
	n := len(psi)
	var mean float64
	for _, c := range cate {
		mean += c / float64(n)
	}
	z := mat.NewDense(n, 2, nil)
	for i := range n {
		z.Set(i, 0, 1)
		z.Set(i, 1, cate[i]-mean)
	}
	var ztz, inv mat.Dense
	ztz.Mul(z.T(), z)
	if err := inv.Inverse(&ztz); err != nil {
		t.Fatal(err)
	}
	var beta mat.VecDense
	var zty mat.VecDense
	zty.MulVec(z.T(), mat.NewVecDense(n, psi))
	beta.MulVec(&inv, &zty)
	meat := mat.NewDense(2, 2, nil)
	for i := range n {
		e := psi[i] - beta.AtVec(0) - beta.AtVec(1)*z.At(i, 1)
		for a := range 2 {
			for b := range 2 {
				meat.Set(a, b, meat.At(a, b)+e*e*z.At(i, a)*z.At(i, b))
			}
		}
	}
	var v, tmp mat.Dense
	tmp.Mul(&inv, meat)
	v.Mul(&tmp, &inv)
	f := float64(n) / float64(n-2)
	want := []float64{beta.AtVec(0), math.Sqrt(f * v.At(0, 0)), beta.AtVec(1), math.Sqrt(f * v.At(1, 1))}
	for i, g := range []float64{got.ATE.Estimate, got.ATE.SE, got.Het.Estimate, got.Het.SE} {
		if math.Abs(g-want[i]) > 1e-9*(1+math.Abs(want[i])) {
			t.Errorf("entry %d: %v from sums, %v from the rows", i, g, want[i])
		}
	}
	a, _ := NewBLPSums(psi[:100], cate[:100], 1.7)
	b, _ := NewBLPSums(psi[100:], cate[100:], 1.7)
	ab, err := a.Add(b)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := ab.BLP()
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(merged.Het.Estimate-got.Het.Estimate) > 1e-9 || math.Abs(merged.Het.SE-got.Het.SE) > 1e-9 {
		t.Errorf("merged %+v, whole %+v", merged.Het, got.Het)
	}
	if _, err := a.Add(BLPSums{N: 3, Shift: 0}); !errors.Is(err, ErrInput) {
		t.Errorf("sums about other shifts added: %v", err)
	}
}

// TestPoolSitesSums: sums of three sets of rows, each about its own mean
// τ̂ and one far from the others', pool (Pool) into the BLP of the rows
// taken together, and the policy sums add into the pooled rows' Policy.
func TestPoolSitesSums(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var all [2][]float64 // ψ, τ̂
	var parts []BLPSums
	var pol PolicySums
	var gamma0 []float64
	for s, off := range []float64{0, 40, -3} {
		_, _, cate, psi := draw(r, 150+50*s, func(x float64) float64 { return off + 2 + x }, 0.5, 2)
		var mean float64
		for _, c := range cate {
			mean += c / float64(len(cate))
		}
		sums, err := NewBLPSums(psi, cate, mean)
		if err != nil {
			t.Fatal(err)
		}
		g0 := make([]float64, len(psi))
		treat := make([]bool, len(psi))
		for i := range g0 {
			g0[i], treat[i] = r.NormFloat64(), cate[i] > 2
		}
		ps, err := NewPolicySums(g0, psi, treat)
		if err != nil {
			t.Fatal(err)
		}
		parts, pol = append(parts, sums), pol.Add(ps)
		all[0], all[1], gamma0 = append(all[0], psi...), append(all[1], cate...), append(gamma0, g0...)
	}
	pooled, err := Pool(parts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pooled.BLP()
	if err != nil {
		t.Fatal(err)
	}
	whole, _ := NewBLPSums(all[0], all[1], 12)
	want, err := whole.BLP()
	if err != nil {
		t.Fatal(err)
	}
	for i, pair := range [][2]float64{{got.ATE.Estimate, want.ATE.Estimate}, {got.ATE.SE, want.ATE.SE}, {got.Het.Estimate, want.Het.Estimate}, {got.Het.SE, want.Het.SE}, {got.HetP, want.HetP}} {
		if math.Abs(pair[0]-pair[1]) > 1e-9 {
			t.Errorf("entry %d: %v pooled from the parts' sums, %v from the rows", i, pair[0], pair[1])
		}
	}
	treat := make([]bool, len(all[0]))
	for i, c := range all[1] {
		treat[i] = c > 2
	}
	wp, err := NewPolicy(gamma0, all[0], treat)
	if err != nil {
		t.Fatal(err)
	}
	gp, err := pol.Policy()
	if err != nil {
		t.Fatal(err)
	}
	for i, pair := range [][2]inference.Estimate{{gp.Value, wp.Value}, {gp.GainOverNone, wp.GainOverNone}, {gp.GainOverAll, wp.GainOverAll}} {
		if math.Abs(pair[0].Estimate-pair[1].Estimate) > 1e-9 || math.Abs(pair[0].SE-pair[1].SE) > 1e-9 || pair[0].N != pair[1].N {
			t.Errorf("policy figure %d: %+v from the parts' sums, %+v from the rows", i, pair[0], pair[1])
		}
	}
	if gp.Share != wp.Share {
		t.Errorf("policy share %v from the parts' sums, %v from the rows", gp.Share, wp.Share)
	}
	if _, err := Pool(nil); !errors.Is(err, ErrInput) {
		t.Errorf("pool of no sums: %v", err)
	}
	if _, err := (PolicySums{}).Policy(); !errors.Is(err, ErrInput) {
		t.Errorf("policy of no rows: %v", err)
	}
}

// TestBLPTest measures the BLP heterogeneity test over replicates of 400
// held-out rows: with a constant effect it rejects at the 5% level about
// 5% of the time, and with τ = 2 + x (one standard deviation of x per unit
// of effect) nearly always.
func TestBLPTest(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const reps, n = 300, 400
	for _, c := range []struct {
		name     string
		tau      func(float64) float64
		lo, hi   float64
		coverATE bool
	}{
		{"constant", func(float64) float64 { return 2 }, 0, 0.10, true},
		{"2 + x", func(x float64) float64 { return 2 + x }, 0.90, 1, true},
	} {
		var rejected, covered int
		for range reps {
			_, truth, cate, psi := draw(r, n, c.tau, 0.5, 2)
			s, err := NewBLPSums(psi, cate, 0)
			if err != nil {
				t.Fatal(err)
			}
			b, err := s.BLP()
			if err != nil {
				t.Fatal(err)
			}
			if b.HetP < 0.05 {
				rejected++
			}
			var ate float64
			for _, v := range truth {
				ate += v / n
			}
			if b.ATE.Lower <= ate && ate <= b.ATE.Upper {
				covered++
			}
		}
		rate, cov := float64(rejected)/reps, float64(covered)/reps
		t.Logf("%s: rejected %.3f, ATE covered %.3f", c.name, rate, cov)
		if rate < c.lo || rate > c.hi || cov < 0.9 {
			t.Errorf("%s: rejected %.3f, want in [%.2f, %.2f]; ATE coverage %.3f, want ≥ 0.9", c.name, rate, c.lo, c.hi, cov)
		}
	}
}

// TestGATESRATEPolicyCoverage: the intervals of GATES (each fifth's mean
// true effect, and the top minus the bottom), of the RATE and each TOC
// point (the same weights applied to the true effects of the ranking by
// τ̂) and of a policy's value and both gains cover their truths at about
// their level over replicates, each on its own.
func TestGATESRATEPolicyCoverage(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const reps, n = 300, 400
	tau := func(x float64) float64 { return 2 + x }
	// Per figure, the replicates whose interval holds its truth, and the
	// replicates: a figure of several parts (the fifths, the TOC's points)
	// is counted part by part, so that a mean cannot hide one that fails.
	covered := map[string]*[2]int{}
	check := func(name string, e inference.Estimate, truth float64) {
		c := covered[name]
		if c == nil {
			c = &[2]int{}
			covered[name] = c
		}
		c[1]++
		if e.Lower <= truth && truth <= e.Upper {
			c[0]++
		}
	}
	for range reps {
		x, truth, cate, psi := draw(r, n, tau, 0.5, 2)
		g, err := NewGATES(psi, cate, Fifths)
		if err != nil {
			t.Fatal(err)
		}
		var means [Fifths]float64
		for k, rows := range g.Rows {
			for _, i := range rows {
				means[k] += truth[i] / float64(len(rows))
			}
			check(fmt.Sprintf("GATES fifth %d", k+1), g.Groups[k], means[k])
		}
		check("GATES top minus bottom", g.TopMinusLow, means[Fifths-1]-means[0])
		rate, err := NewRATE(psi, cate)
		if err != nil {
			t.Fatal(err)
		}
		exact, err := NewRATE(truth, cate) // the estimand: the ranking by τ̂, scored by the truth
		if err != nil {
			t.Fatal(err)
		}
		check("AUTOC", rate.AUTOC, exact.AUTOC.Estimate)
		check("Qini", rate.Qini, exact.Qini.Estimate)
		for j, p := range rate.TOC {
			check(fmt.Sprintf("TOC(%.1f)", p.Q), p.TOC, exact.TOC[j].TOC.Estimate)
		}
		// The rule "treat where τ̂ > 2", with μ0 = x and Γ0 = μ0 + noise.
		treat, gamma0 := make([]bool, n), make([]float64, n)
		var v, gn, ga float64
		for i := range n {
			treat[i] = cate[i] > 2
			gamma0[i] = x[i] + 2*r.NormFloat64()
			v += x[i] / n
			if treat[i] {
				v += truth[i] / n
				gn += truth[i] / n
			} else {
				ga -= truth[i] / n
			}
		}
		p, err := NewPolicy(gamma0, psi, treat)
		if err != nil {
			t.Fatal(err)
		}
		check("policy value", p.Value, v)
		check("gain over none", p.GainOverNone, gn)
		check("gain over all", p.GainOverAll, ga)
	}
	names := slices.Sorted(maps.Keys(covered))
	for _, name := range names {
		cov := float64(covered[name][0]) / float64(covered[name][1])
		t.Logf("%s: coverage %.3f", name, cov)
		// The TOC's standard error counts the spread of the true effects
		// among the rows as noise, so it is conservative for the rows'
		// own TOC: it must not under-cover.
		if most := 0.99; cov < 0.9 || cov > most && !strings.HasPrefix(name, "TOC") {
			t.Errorf("%s: coverage %.3f, want about 0.95", name, cov)
		}
	}
}

// TestRATEOfAPerfectRanking: a ranking by the true effect has a positive
// AUTOC and Qini; one by noise has about none, and ties do not depend on
// the rows' order.
func TestRATEOfAPerfectRanking(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	x, truth, _, _ := draw(r, 1000, func(x float64) float64 { return 2 + x }, 0, 0)
	good, err := NewRATE(truth, truth)
	if err != nil {
		t.Fatal(err)
	}
	// For τ = 2 + x with x normal, TOC(q) = E[x | x above its 1 − q
	// quantile] = φ(Φ⁻¹(1 − q))/q, whose integral is about 1/√π·… > 0.5.
	if good.AUTOC.Estimate < 0.5 || good.Qini.Estimate < 0.1 || good.TOC[0].TOC.Estimate < 1.5 {
		t.Errorf("perfect ranking: AUTOC %v, Qini %v, TOC(0.1) %v", good.AUTOC.Estimate, good.Qini.Estimate, good.TOC[0].TOC.Estimate)
	}
	flat := make([]float64, len(x))
	same, err := NewRATE(truth, flat)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(same.AUTOC.Estimate) > 1e-12 || math.Abs(same.Qini.Estimate) > 1e-12 {
		t.Errorf("a ranking of ties: AUTOC %v, Qini %v, want 0", same.AUTOC.Estimate, same.Qini.Estimate)
	}
}

// TestErrors: every input the statistics refuse.
func TestErrors(t *testing.T) {
	nan := math.NaN()
	for name, err := range map[string]error{
		"BLP lengths": func() error { _, err := NewBLPSums([]float64{1}, nil, 0); return err }(),
		"BLP NaN":     func() error { _, err := NewBLPSums([]float64{nan}, []float64{1}, 0); return err }(),
		"BLP rows": func() error {
			s, _ := NewBLPSums([]float64{1, 2}, []float64{1, 2}, 0)
			_, err := s.BLP()
			return err
		}(),
		"BLP constant τ̂": func() error {
			s, _ := NewBLPSums([]float64{1, 2, 3, 4}, []float64{1, 1, 1, 1}, 0)
			_, err := s.BLP()
			return err
		}(),
		"GATES rows":    func() error { _, err := NewGATES(make([]float64, 9), make([]float64, 9), 5); return err }(),
		"GATES NaN":     func() error { _, err := NewGATES(make([]float64, 10), append(make([]float64, 9), nan), 5); return err }(),
		"RATE lengths":  func() error { _, err := NewRATE(make([]float64, 4), make([]float64, 3)); return err }(),
		"policy length": func() error { _, err := NewPolicy(nil, make([]float64, 4), make([]bool, 3)); return err }(),
		"policy NaN":    func() error { _, err := NewPolicy(nil, []float64{1, nan}, make([]bool, 2)); return err }(),
	} {
		if !errors.Is(err, ErrInput) {
			t.Errorf("%s: %v, want ErrInput", name, err)
		}
	}
}

// TestCLAN: the covariate that drives the effect differs between the top
// and the bottom fifth; one that does not, by less than three standard
// errors.
func TestCLAN(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	x, _, cate, psi := draw(r, 1000, func(x float64) float64 { return 2 + x }, 0.3, 2)
	cov := mat.NewDense(len(x), 2, nil)
	for i, v := range x {
		cov.Set(i, 0, v)
		cov.Set(i, 1, r.NormFloat64())
	}
	g, err := NewGATES(psi, cate, Fifths)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCLAN(g, cov)
	if err != nil {
		t.Fatal(err)
	}
	if c[0].Spread.Lower < 1 || math.Abs(c[1].Spread.Estimate) > 3*c[1].Spread.SE {
		t.Errorf("driver spread %+v, noise spread %+v", c[0].Spread, c[1].Spread)
	}
}
