package selection

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// handRows: pseudo-outcomes and three candidates' CATEs on four rows:
// candidate 0 is exact, 1 misses the last row by 1 and 2 every row by 2.
func handRows() ([]float64, [][]float64) {
	return []float64{1, 2, 3, 4}, [][]float64{{1, 2, 3, 4}, {1, 2, 3, 5}, {3, 4, 5, 6}}
}

func TestCombineByHand(t *testing.T) {
	psi, cates := handRows()
	pairs, err := PairSums(psi, cates)
	if err != nil {
		t.Fatal(err)
	}
	// Candidate 1's differences from the best, 0 0 0 1, have mean 0.25
	// and standard error 0.25: one standard error. Candidate 2's, 4 4 4
	// 4, have standard error 0.
	for _, tc := range []struct {
		z       float64
		members []int
		loss    float64
	}{
		{0.9, []int{0}, 0},
		{1.1, []int{0, 1}, 0.0625}, // mean CATE 1 2 3 4.5: residual −0.5 on one row of four
		{100, []int{0, 1}, 0.0625},
	} {
		e, err := Combine(pairs, []Centre{{}}, tc.z)
		if err != nil {
			t.Fatal(err)
		}
		if e.Best != 0 || !slices.Equal(e.Members, tc.members) || math.Abs(e.Loss-tc.loss) > 1e-15 || len(e.Sites) != 1 || !reflect.DeepEqual(e.Sites[0], Centring{}) {
			t.Errorf("z %v: %+v, want members %v of loss %v and no shift", tc.z, e, tc.members, tc.loss)
		}
	}
	// The shift of one site: ψ of mean 3 and variance 1 over 100 rows
	// (standard error 0.1); the members' CATEs average 2, a gap of 1,
	// shrunk by 1 − 0.1²/1².
	centre := Centre{N: 100, Psi: 300, PsiSq: 99 + 900, CATE: []float64{200, 200, 500}}
	e, err := Combine(pairs, []Centre{centre}, 1.1)
	if err != nil {
		t.Fatal(err)
	}
	if c := e.Sites[0]; math.Abs(c.Gap-1) > 1e-12 || math.Abs(c.GapSE-0.1) > 1e-12 || math.Abs(c.Shift-0.99) > 1e-12 || e.Spread != 0 {
		t.Errorf("gap %v ± %v, shift %v, spread %v; want 1 ± 0.1, 0.99 and 0", c.Gap, c.GapSE, c.Shift, e.Spread)
	}
	// A gap smaller than its standard error is not moved at all.
	centre.CATE = []float64{295, 295, 0}
	if e, _ := Combine(pairs, []Centre{centre}, 1.1); e.Sites[0].Shift != 0 || math.Abs(e.Sites[0].Gap-0.05) > 1e-12 {
		t.Errorf("gap %v: shift %v, want 0", e.Sites[0].Gap, e.Sites[0].Shift)
	}
}

// centreOf returns the Centre of n rows whose ψ have the given mean and
// variance (with divisor n − 1) and whose one candidate's CATEs average
// cate.
func centreOf(n, mean, variance, cate float64) Centre {
	return Centre{N: n, Psi: n * mean, PsiSq: (n-1)*variance + n*mean*mean, CATE: []float64{n * cate}}
}

func TestRecentreByHand(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12 }
	// Two sites of 100 rows, ψ of variance 1 (v = 0.01 each), whose gaps
	// are +1 and −1: the fixed-effect mean is 0, Cochran's Q = 1/0.01 +
	// 1/0.01 = 200, so t² = (200 − 1)/(200 − 20000/200) = 1.99. The
	// random-effects mean is 0 with variance 1/(2/(0.01 + 1.99)) = 1, and
	// each site keeps 1.99/2 = 0.995 of its own gap, with variance
	// 0.995·0.01 + 0.005²·1.
	two := []Centre{centreOf(100, 3, 1, 2), centreOf(100, 5, 1, 6)}
	got, spread, err := Recentre(two, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	v := 0.995*0.01 + 0.005*0.005
	for s, sign := range []float64{1, -1} {
		want := Centring{Gap: sign * 0.995, GapSE: math.Sqrt(v), Shift: sign * 0.995 * (1 - v/(0.995*0.995))}
		if c := got[s]; !near(c.Gap, want.Gap) || !near(c.GapSE, want.GapSE) || !near(c.Shift, want.Shift) {
			t.Errorf("unlike sites, site %d: %+v, want %+v", s, c, want)
		}
	}
	if !near(spread, math.Sqrt(1.99)) {
		t.Errorf("spread %v, want √1.99", spread)
	}

	// Gaps of 1 and 1.05 differ by less than their noise (Q = 0.125 <
	// 1): t² = 0, and both sites, and a third with no rows, take the
	// pooled gap 1.025 with variance 1/(100 + 100) = 0.005.
	alike := []Centre{centreOf(100, 3, 1, 2), centreOf(100, 3, 1, 1.95), {CATE: []float64{0}}}
	got, spread, err = Recentre(alike, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	for s, c := range got {
		if !near(c.Gap, 1.025) || !near(c.GapSE, math.Sqrt(0.005)) || !near(c.Shift, 1.025*(1-0.005/(1.025*1.025))) {
			t.Errorf("alike sites, site %d: %+v, want the pooled gap 1.025 ± √0.005", s, c)
		}
	}
	if spread != 0 {
		t.Errorf("alike sites: spread %v, want 0", spread)
	}

	// A site with no rows beside unlike sites takes the pooled gap, 0,
	// with variance 1 + 1.99: no shift.
	got, _, err = Recentre(append(two, Centre{CATE: []float64{0}}), []int{0})
	if err != nil {
		t.Fatal(err)
	}
	if c := got[2]; c.Gap != 0 || !near(c.GapSE, math.Sqrt(2.99)) || c.Shift != 0 {
		t.Errorf("a site without rows beside unlike sites: %+v, want gap 0 ± √2.99 and no shift", c)
	}

	// No site with rows: no shift anywhere.
	if got, spread, err := Recentre([]Centre{{CATE: []float64{0}}, {N: 1, Psi: 3, PsiSq: 9, CATE: []float64{1}}}, []int{0}); err != nil || !reflect.DeepEqual(got, []Centring{{}, {}}) || spread != 0 {
		t.Errorf("no site with two rows: %+v, spread %v, %v; want no shift", got, spread, err)
	}
}

// TestRecentreTracksEachSite: three sites of 400 rows whose members' CATEs
// miss the truth by +0.5, −0.5 and 0, with ψ the truth plus noise of
// standard deviation 2. One shift for all (the pooled gap, about 0) would
// leave each site's error; each site's own shift must come within 0.2 of
// its error. Sites that miss alike must each come as near, with a small
// spread (DerSimonian–Laird's t² is often above 0 by chance).
func TestRecentreTracksEachSite(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	build := func(bias []float64) []Centre {
		var out []Centre
		for _, b := range bias {
			n := 400
			psi, cate := make([]float64, n), make([]float64, n)
			for i := range n {
				truth := 1 + rng.NormFloat64()
				psi[i], cate[i] = truth+2*rng.NormFloat64(), truth+b
			}
			c, err := CentreSums(psi, [][]float64{cate})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, c)
		}
		return out
	}
	bias := []float64{0.5, -0.5, 0}
	got, spread, err := Recentre(build(bias), []int{0})
	if err != nil {
		t.Fatal(err)
	}
	for s, c := range got {
		if math.Abs(c.Shift+bias[s]) > 0.2 {
			t.Errorf("site %d misses by %+v: shift %+.3f (gap %.3f ± %.3f)", s, bias[s], c.Shift, c.Gap, c.GapSE)
		}
	}
	t.Logf("unlike sites: %+v, spread %.3f", got, spread)
	if spread < 0.2 {
		t.Errorf("spread %.3f of gaps +0.5, −0.5 and 0; want > 0.2", spread)
	}
	got, spread, err = Recentre(build([]float64{0.3, 0.3, 0.3}), []int{0})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("alike sites: %+v, spread %.3f", got, spread)
	for s, c := range got {
		if math.Abs(c.Shift+0.3) > 0.2 {
			t.Errorf("alike sites missing by 0.3: site %d shift %+.3f; want −0.3 ± 0.2", s, c.Shift)
		}
	}
	if spread > 0.2 {
		t.Errorf("alike sites: spread %.3f, want < 0.2", spread)
	}
}

func TestEnsembleSumsAddOverSites(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	n := 40
	psi := make([]float64, n)
	cates := [][]float64{make([]float64, n), make([]float64, n)}
	for i := range n {
		psi[i] = 2 + rng.NormFloat64()*3
		for c := range cates {
			cates[c][i] = rng.NormFloat64()
		}
	}
	pooled, _ := PairSums(psi, cates)
	var p Pairs
	for _, r := range [][2]int{{0, 15}, {15, n}} {
		part := [][]float64{cates[0][r[0]:r[1]], cates[1][r[0]:r[1]]}
		pp, err := PairSums(psi[r[0]:r[1]], part)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Add(pp); err != nil {
			t.Fatal(err)
		}
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	for i := range p.Loss {
		if !near(p.Loss[i], pooled.Loss[i]) || !near(p.Res[i], pooled.Res[i]) {
			t.Fatalf("pair sums %d: sites add to %v, %v; pooled %v, %v", i, p.Loss[i], p.Res[i], pooled.Loss[i], pooled.Res[i])
		}
	}
	if err := p.Add(NewPairs(3)); !errors.Is(err, ErrInput) {
		t.Errorf("adding pair sums of 3 candidates to 2's: %v, want ErrInput", err)
	}
}

func TestCentreSumsByHand(t *testing.T) {
	got, err := CentreSums([]float64{1, 2, 3}, [][]float64{{0, 1, 2}, {5, 5, 5}})
	if err != nil {
		t.Fatal(err)
	}
	if want := (Centre{N: 3, Psi: 6, PsiSq: 14, CATE: []float64{3, 15}}); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("centring sums %+v, want %+v", got, want)
	}
}

func TestCombineErrors(t *testing.T) {
	psi, cates := handRows()
	pairs, _ := PairSums(psi, cates)
	one, _ := PairSums(psi[:1], [][]float64{cates[0][:1], cates[1][:1], cates[2][:1]})
	short := pairs
	short.Res = short.Res[:4]
	for _, tc := range []struct {
		name   string
		pairs  Pairs
		centre Centre
		z      float64
	}{
		{"no candidates", Pairs{}, Centre{}, 1},
		{"pair sums of the wrong size", short, Centre{}, 1},
		{"negative z", pairs, Centre{}, -1},
		{"one row", one, Centre{}, 1},
		{"centre of two", pairs, Centre{N: 10, CATE: []float64{1, 2}}, 1.1},
	} {
		if _, err := Combine(tc.pairs, []Centre{tc.centre}, tc.z); !errors.Is(err, ErrInput) {
			t.Errorf("%s: %v, want ErrInput", tc.name, err)
		}
	}
	if _, err := PairSums(psi, [][]float64{{1}}); !errors.Is(err, ErrInput) {
		t.Errorf("PairSums of a short candidate: %v, want ErrInput", err)
	}
	if _, err := CentreSums(psi, [][]float64{{1}}); !errors.Is(err, ErrInput) {
		t.Errorf("CentreSums of a short candidate: %v, want ErrInput", err)
	}
}
