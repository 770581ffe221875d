package selection

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// sitePairs returns the Pairs of n validation rows whose pseudo-outcome
// is the effect tau plus noise, for two candidates that predict 0 and 2.
func sitePairs(t *testing.T, r *rand.Rand, n int, tau float64) Pairs {
	t.Helper()
	psi, c0, c1 := make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range psi {
		psi[i], c0[i], c1[i] = tau+r.NormFloat64(), 0, 2
	}
	p, err := PairSums(psi, [][]float64{c0, c1})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBySite(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		// per site: validation rows and the effect; candidate 0 predicts
		// 0 and candidate 1 predicts 2
		rows      []int
		tau       []float64
		wantBests []int
	}{
		// Four sites where candidate 1 is right, one large one where
		// candidate 0 is: the large site follows its own rows.
		{"a large unlike site", []int{400, 400, 400, 400, 2000}, []float64{2, 2, 2, 2, 0}, []int{1, 1, 1, 1, 0}},
		// Alike sites: every site chooses as the federation does.
		{"alike", []int{300, 300, 300}, []float64{0.2, 0.2, 0.2}, []int{0, 0, 0}},
		// A site of 3 validation rows borrows the federation's evidence.
		{"a tiny unlike site", []int{400, 400, 400, 3}, []float64{2, 2, 2, 0}, []int{1, 1, 1, 1}},
		// A site without validation rows takes the pooled choice.
		{"a site without rows", []int{400, 400, 0}, []float64{2, 2, 0}, []int{1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sites := make([]Pairs, len(tc.rows))
			for s, n := range tc.rows {
				if n == 0 {
					sites[s] = NewPairs(2)
					continue
				}
				sites[s] = sitePairs(t, r, n, tc.tau[s])
			}
			got, err := BySite(sites, DefaultZ)
			if err != nil {
				t.Fatal(err)
			}
			var bests []int
			for s, ch := range got {
				bests = append(bests, ch.Best)
				if !slices.Contains(ch.Members, ch.Best) || ch.Diff[ch.Best] != 0 {
					t.Errorf("site %d: %+v: its best is not a member of difference 0", s, ch)
				}
			}
			if !slices.Equal(bests, tc.wantBests) {
				t.Errorf("bests %v, want %v", bests, tc.wantBests)
			}
		})
	}
}

func TestBySiteRefuses(t *testing.T) {
	if _, err := BySite(nil, 1); err == nil {
		t.Error("no sites were accepted")
	}
	if _, err := BySite([]Pairs{NewPairs(2), NewPairs(3)}, 1); err == nil {
		t.Error("sites of different candidate counts were accepted")
	}
	if _, err := BySite([]Pairs{NewPairs(2)}, 1); err == nil {
		t.Error("no validation rows were accepted")
	}
	if _, err := CombineBySite(Ensemble{Sites: make([]Centring, 1)}, []Pairs{NewPairs(2)}, nil, 1); err == nil {
		t.Error("pair sums without centring sums were accepted")
	}
}
