package selection

import (
	"errors"
	"math"
	"math/rand/v2"
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
		e, err := Combine(pairs, Centre{}, tc.z)
		if err != nil {
			t.Fatal(err)
		}
		if e.Best != 0 || !slices.Equal(e.Members, tc.members) || math.Abs(e.Loss-tc.loss) > 1e-15 || e.Shift != 0 {
			t.Errorf("z %v: %+v, want members %v of loss %v and no shift", tc.z, e, tc.members, tc.loss)
		}
	}
	// The shift: ψ of mean 3 and variance 1 over 100 rows (standard
	// error 0.1); the members' CATEs average 2, a gap of 1, shrunk by
	// 1 − 0.1²/1².
	centre := Centre{N: 100, Psi: 300, PsiSq: 99 + 900, CATE: []float64{200, 200, 500}}
	e, err := Combine(pairs, centre, 1.1)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(e.Gap-1) > 1e-12 || math.Abs(e.GapSE-0.1) > 1e-12 || math.Abs(e.Shift-0.99) > 1e-12 {
		t.Errorf("gap %v ± %v, shift %v; want 1 ± 0.1 and 0.99", e.Gap, e.GapSE, e.Shift)
	}
	// A gap smaller than its standard error is not moved at all.
	centre.CATE = []float64{295, 295, 0}
	if e, _ := Combine(pairs, centre, 1.1); e.Shift != 0 || math.Abs(e.Gap-0.05) > 1e-12 {
		t.Errorf("gap %v: shift %v, want 0", e.Gap, e.Shift)
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
	pooledP, _ := PairSums(psi, cates)
	pooledC, _ := CentreSums(psi, cates)
	var p Pairs
	var c Centre
	for _, r := range [][2]int{{0, 15}, {15, n}} {
		part := [][]float64{cates[0][r[0]:r[1]], cates[1][r[0]:r[1]]}
		pp, err := PairSums(psi[r[0]:r[1]], part)
		if err != nil {
			t.Fatal(err)
		}
		pc, err := CentreSums(psi[r[0]:r[1]], part)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Add(pp); err != nil {
			t.Fatal(err)
		}
		if err := c.Add(pc); err != nil {
			t.Fatal(err)
		}
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	for i := range p.Loss {
		if !near(p.Loss[i], pooledP.Loss[i]) || !near(p.Res[i], pooledP.Res[i]) {
			t.Fatalf("pair sums %d: sites add to %v, %v; pooled %v, %v", i, p.Loss[i], p.Res[i], pooledP.Loss[i], pooledP.Res[i])
		}
	}
	if !near(c.N, pooledC.N) || !near(c.Psi, pooledC.Psi) || !near(c.PsiSq, pooledC.PsiSq) || !near(c.CATE[1], pooledC.CATE[1]) {
		t.Errorf("centring sums: sites add to %+v, pooled %+v", c, pooledC)
	}
	if err := p.Add(NewPairs(3)); !errors.Is(err, ErrInput) {
		t.Errorf("adding pair sums of 3 candidates to 2's: %v, want ErrInput", err)
	}
	if err := c.Add(Centre{CATE: make([]float64, 3)}); !errors.Is(err, ErrInput) {
		t.Errorf("adding centring sums of 3 candidates to 2's: %v, want ErrInput", err)
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
		{"centre of two", pairs, Centre{N: 10, CATE: []float64{1, 2}}, 1},
	} {
		if _, err := Combine(tc.pairs, tc.centre, tc.z); !errors.Is(err, ErrInput) {
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
