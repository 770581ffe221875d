package selection

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// losses returns the Sums of every candidate on rows with pseudo-outcomes
// psi against candidate ref, as a site's pair sums give them.
func losses(psi []float64, cates [][]float64, ref int) ([]Sums, error) {
	p, err := PairSums(psi, cates)
	if err != nil {
		return nil, err
	}
	return p.Sums(ref)
}

func TestLossesByHand(t *testing.T) {
	psi := []float64{1, 3}
	cates := [][]float64{{0, 0}, {1, 2}}
	sums, err := losses(psi, cates, 0)
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
	// The sums of the pooled rows, computed row by row.
	pooled := make([]Sums, len(cates))
	for i, v := range psi {
		lref := (v - cates[1][i]) * (v - cates[1][i])
		for c := range cates {
			l := (v - cates[c][i]) * (v - cates[c][i])
			pooled[c].N++
			pooled[c].Loss += l
			pooled[c].LossSq += l * l
			pooled[c].Diff += l - lref
			pooled[c].DiffSq += (l - lref) * (l - lref)
		}
	}
	// The sites send their pair sums, which add; every candidate's Sums
	// derive from the total.
	var total Pairs
	for _, r := range [][2]int{{0, 20}, {20, n}} {
		part := make([][]float64, len(cates))
		for c := range cates {
			part[c] = cates[c][r[0]:r[1]]
		}
		p, err := PairSums(psi[r[0]:r[1]], part)
		if err != nil {
			t.Fatal(err)
		}
		if err := total.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	a, err := total.Sums(1)
	if err != nil {
		t.Fatal(err)
	}
	for c := range a {
		for _, f := range [][2]float64{{a[c].N, pooled[c].N}, {a[c].Loss, pooled[c].Loss}, {a[c].LossSq, pooled[c].LossSq}, {a[c].Diff, pooled[c].Diff}, {a[c].DiffSq, pooled[c].DiffSq}} {
			if math.Abs(f[0]-f[1]) > 1e-9*math.Max(1, math.Abs(f[1])) {
				t.Errorf("candidate %d: sites add to %+v, pooled %+v", c, a[c], pooled[c])
				break
			}
		}
	}
}

func TestScores(t *testing.T) {
	// Candidate 1 is better than the reference by 1 with standard error
	// 0.5 (differences −1.5 and −0.5): 2 standard errors.
	sums := []Sums{
		{N: 2, Loss: 10, LossSq: 52},
		{N: 2, Loss: 8, LossSq: 34, Diff: -2, DiffSq: 2.5},
		{N: 2, Loss: 12, LossSq: 80, Diff: 2, DiffSq: 2.5},
	}
	scores, err := Scores(sums, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d, se := scores[1].Diff, scores[1].DiffSE; math.Abs(d+1) > 1e-12 || math.Abs(se-0.5) > 1e-12 {
		t.Errorf("diff %v ± %v, want −1 ± 0.5", d, se)
	}
	// Losses 3 and 5 (Σl 8, Σl² 34): mean 4, standard error 1.
	if l, se := scores[1].Loss, scores[1].SE; math.Abs(l-4) > 1e-12 || math.Abs(se-1) > 1e-12 {
		t.Errorf("loss %v ± %v, want 4 ± 1", l, se)
	}
	for c, sc := range scores {
		if sc.Chosen {
			t.Errorf("candidate %d chosen by Scores, which only scores", c)
		}
	}
}

func TestErrors(t *testing.T) {
	ok := []Sums{{N: 3, Loss: 1, LossSq: 1}, {N: 3, Loss: 1, LossSq: 1}}
	for _, tc := range []struct {
		name string
		err  func() error
	}{
		{"losses reference", func() error { _, err := losses([]float64{1}, [][]float64{{1}}, 1); return err }},
		{"losses length", func() error { _, err := losses([]float64{1, 2}, [][]float64{{1}}, 0); return err }},
		{"losses NaN pseudo-outcome", func() error { _, err := losses([]float64{math.NaN()}, [][]float64{{1}}, 0); return err }},
		{"losses infinite CATE", func() error { _, err := losses([]float64{1}, [][]float64{{1}, {math.Inf(1)}}, 0); return err }},
		{"scores reference", func() error { _, err := Scores(ok, -1); return err }},
		{"scores rows", func() error { _, err := Scores([]Sums{{N: 1}}, 0); return err }},
		{"scores unequal rows", func() error { _, err := Scores([]Sums{{N: 3}, {N: 2}}, 0); return err }},
	} {
		if err := tc.err(); !errors.Is(err, ErrInput) {
			t.Errorf("%s: error %v, want ErrInput", tc.name, err)
		}
	}
}

// TestLossTracksPEHE simulates pseudo-outcomes ψ = τ(x) + noise far larger
// than the candidates' errors, as on a few hundred real rows. The mean
// paired difference must estimate the difference in PEHE, and the
// ensemble must be the clearly better candidate alone in most replicates
// and hold a no better one rarely.
func TestLossTracksPEHE(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const n, reps = 400, 200
	var diffErr float64
	var alone int
	var member [3]int
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
		pairs, err := PairSums(psi, cates)
		if err != nil {
			t.Fatal(err)
		}
		scores, ens, err := Decide(pairs, nil, DefaultZ)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(ens.Members, []int{1}) {
			alone++
		}
		for _, c := range ens.Members {
			member[c]++
		}
		diffErr += (scores[1].Diff - (pehe[1] - pehe[0])) / reps
	}
	if math.Abs(diffErr) > 0.05 {
		t.Errorf("mean paired difference misses the PEHE difference by %.3f", diffErr)
	}
	t.Logf("the better candidate alone in %d of %d replicates; members reference/better/no-better %v", alone, reps, member)
	if alone < reps*7/10 || member[1] < reps*9/10 || member[2] > reps*3/10 {
		t.Errorf("the better candidate alone in %d of %d replicates; members reference/better/no-better %v", alone, reps, member)
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
