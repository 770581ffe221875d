package selection

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestLossesByHand(t *testing.T) {
	psi := []float64{1, 3}
	cates := [][]float64{{0, 0}, {1, 2}}
	sums, err := Losses(psi, cates, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Reference losses 1, 9; candidate 1's 0, 1; differences −1, −8.
	want := []Sums{
		{N: 2, Loss: 10, LossSq: 82},
		{N: 2, Loss: 1, LossSq: 1, Diff: -9, DiffSq: 65},
	}
	for c := range want {
		if sums[c] != want[c] {
			t.Errorf("candidate %d: %+v, want %+v", c, sums[c], want[c])
		}
	}
}

func TestSumsAddOverSites(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 50
	psi := make([]float64, n)
	cates := [][]float64{make([]float64, n), make([]float64, n), make([]float64, n)}
	for i := range n {
		psi[i] = rng.NormFloat64() * 3
		for c := range cates {
			cates[c][i] = rng.NormFloat64()
		}
	}
	pooled, err := Losses(psi, cates, 1)
	if err != nil {
		t.Fatal(err)
	}
	split := func(lo, hi int) []Sums {
		part := make([][]float64, len(cates))
		for c := range cates {
			part[c] = cates[c][lo:hi]
		}
		s, err := Losses(psi[lo:hi], part, 1)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := split(0, 20), split(20, n)
	for c := range a {
		a[c].Add(b[c])
		for _, f := range [][2]float64{{a[c].N, pooled[c].N}, {a[c].Loss, pooled[c].Loss}, {a[c].LossSq, pooled[c].LossSq}, {a[c].Diff, pooled[c].Diff}, {a[c].DiffSq, pooled[c].DiffSq}} {
			if math.Abs(f[0]-f[1]) > 1e-9*math.Max(1, math.Abs(f[1])) {
				t.Errorf("candidate %d: sites add to %+v, pooled %+v", c, a[c], pooled[c])
				break
			}
		}
	}
}

func TestChooseRule(t *testing.T) {
	// Candidate 1 is better than the reference by 1 with standard error
	// 0.5 (differences −1.5 and −0.5): 2 standard errors.
	sums := []Sums{
		{N: 2, Loss: 10, LossSq: 52},
		{N: 2, Loss: 8, LossSq: 34, Diff: -2, DiffSq: 2.5},
		{N: 2, Loss: 12, LossSq: 80, Diff: 2, DiffSq: 2.5},
	}
	for _, tc := range []struct {
		z    float64
		want int
	}{{0, 1}, {1.9, 1}, {2.1, 0}, {10, 0}} {
		scores, got, err := Choose(sums, 0, tc.z)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want || !scores[got].Chosen {
			t.Errorf("z %v: chose %d, want %d", tc.z, got, tc.want)
		}
		if d, se := scores[1].Diff, scores[1].DiffSE; math.Abs(d+1) > 1e-12 || math.Abs(se-0.5) > 1e-12 {
			t.Errorf("diff %v ± %v, want −1 ± 0.5", d, se)
		}
	}
}

func TestErrors(t *testing.T) {
	ok := []Sums{{N: 3, Loss: 1, LossSq: 1}, {N: 3, Loss: 1, LossSq: 1}}
	for _, tc := range []struct {
		name string
		err  func() error
	}{
		{"losses reference", func() error { _, err := Losses([]float64{1}, [][]float64{{1}}, 1); return err }},
		{"losses length", func() error { _, err := Losses([]float64{1, 2}, [][]float64{{1}}, 0); return err }},
		{"losses NaN pseudo-outcome", func() error { _, err := Losses([]float64{math.NaN()}, [][]float64{{1}}, 0); return err }},
		{"losses infinite CATE", func() error { _, err := Losses([]float64{1}, [][]float64{{1}, {math.Inf(1)}}, 0); return err }},
		{"choose reference", func() error { _, _, err := Choose(ok, -1, 1); return err }},
		{"choose z", func() error { _, _, err := Choose(ok, 0, -1); return err }},
		{"choose rows", func() error { _, _, err := Choose([]Sums{{N: 1}}, 0, 1); return err }},
		{"choose unequal rows", func() error { _, _, err := Choose([]Sums{{N: 3}, {N: 2}}, 0, 1); return err }},
	} {
		if err := tc.err(); !errors.Is(err, ErrInput) {
			t.Errorf("%s: error %v, want ErrInput", tc.name, err)
		}
	}
}

// TestLossTracksPEHE simulates pseudo-outcomes ψ = τ(x) + noise far larger
// than the candidates' errors, as on a few hundred real rows. The mean
// paired difference must estimate the difference in PEHE, and the rule
// must pick a clearly better candidate in most replicates (it does in 75%) and a no better
// one rarely.
func TestLossTracksPEHE(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const n, reps = 400, 200
	var diffErr float64
	picked := [3]int{}
	for range reps {
		psi := make([]float64, n)
		cates := [][]float64{make([]float64, n), make([]float64, n), make([]float64, n)}
		var pehe [3]float64
		for i := range n {
			x := rng.Float64()*4 - 2
			tau := math.Sin(2 * x)
			psi[i] = tau + 4*rng.NormFloat64()
			cates[0][i] = 0                             // reference: no heterogeneity
			cates[1][i] = tau + 0.1*rng.NormFloat64()   // far better
			cates[2][i] = 0.02 + 0.01*rng.NormFloat64() // as bad as the reference
			for c := range cates {
				pehe[c] += (cates[c][i] - tau) * (cates[c][i] - tau) / n
			}
		}
		sums, err := Losses(psi, cates, 0)
		if err != nil {
			t.Fatal(err)
		}
		scores, got, err := Choose(sums, 0, DefaultZ)
		if err != nil {
			t.Fatal(err)
		}
		picked[got]++
		diffErr += (scores[1].Diff - (pehe[1] - pehe[0])) / reps
	}
	if math.Abs(diffErr) > 0.05 {
		t.Errorf("mean paired difference misses the PEHE difference by %.3f", diffErr)
	}
	if picked[1] < reps*7/10 || picked[2] > reps/10 {
		t.Errorf("picked reference/better/no-better %v times in %d replicates", picked, reps)
	}
}

// TestSiteHoldout: a site holds rows out only when its training part keeps
// minArm rows in each arm and its held-out part has 2·minArm rows.
func TestSiteHoldout(t *testing.T) {
	arms := func(treated, control int) []float64 {
		w := make([]float64, treated+control)
		for i := range treated {
			w[i] = 1
		}
		return w
	}
	for _, tc := range []struct {
		name             string
		w                []float64
		minArm, wantHeld int
	}{
		{"large enough", arms(50, 50), 5, 20},
		{"too few held out", arms(20, 20), 5, 0},                 // 8 held out < 10
		{"a small arm that keeps its bound", arms(6, 94), 5, 20}, // 1 of 6 treated held out leaves 5
		{"an arm left below the bound", arms(5, 95), 5, 0},
		{"no bound", arms(5, 5), 0, 2},
	} {
		held, err := SiteHoldout(tc.w, 0.2, 3, tc.minArm)
		if err != nil {
			t.Fatal(err)
		}
		if len(held) != tc.wantHeld {
			t.Errorf("%s: %d rows held out, want %d", tc.name, len(held), tc.wantHeld)
		}
	}
	if _, err := SiteHoldout([]float64{0, 1}, 2, 1, 5); !errors.Is(err, ErrInput) {
		t.Errorf("share 2: %v, want ErrInput", err)
	}
}
