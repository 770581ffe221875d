package selection

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/crffd/crffd/estimator"
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

// TestLocalCandidates: with a choice per site, each site scores a
// T-learner and a DR-learner of its own training rows, solved from its own
// Stats, which differ from site to site and from the pooled ones.
func TestLocalCandidates(t *testing.T) {
	ctx := context.Background()
	data, val := linearSites(3, 2, 120)
	// Site 1's effect departs from site 0's.
	for i, w := range data[1].W {
		data[1].Y[i] += 3 * w
	}
	opt := Options{Kernels: []Kernel{{Name: "gaussian", Spectral: estimator.GaussianSpectral{}}}, Z: DefaultZ, Ridge: []float64{10}, BySite: true}
	res, err := Run(ctx, data, val, schema2, smallConfig(), opt)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range res.Candidates {
		names = append(names, c.Name)
	}
	want := []string{"latent/gaussian", "outcome/gaussian", "tlearner/10", "dr/10", "site-tlearner/10", "site-dr/10", "ensemble"}
	if !slices.Equal(names, want) {
		t.Fatalf("candidates %v, want %v", names, want)
	}
	for s, d := range data {
		rows, err := TrainingRows(d.Rows(), val[s])
		if err != nil {
			t.Fatal(err)
		}
		psi, err := PseudoOutcomes(d, res.Nuisance[s], rows)
		if err != nil {
			t.Fatal(err)
		}
		own, err := SiteStats(ctx, res.Models[0], s, d.Subset(rows), psi)
		if err != nil {
			t.Fatal(err)
		}
		for c, kind := range map[int]string{4: KindTLearner, 5: KindDR} {
			got, err := res.CATE(ctx, c, s, d)
			if err != nil {
				t.Fatal(err)
			}
			// The same learner fitted from the site's Stats alone, as a
			// pooled candidate of a federation of that one site.
			_, ests, err := RidgeCandidates(own, []float64{10}, []string{kind})
			if err != nil {
				t.Fatal(err)
			}
			alone, err := ests[0].CATE(ctx, res.Models[0], s, d, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, alone) {
				t.Errorf("site %d, %s: CATE is not the site's own fit", s, res.Candidates[c].Name)
			}
			pooled, err := res.CATE(ctx, c-2, s, d)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Equal(got, pooled) {
				t.Errorf("site %d, %s: CATE equals the pooled learner's", s, res.Candidates[c].Name)
			}
		}
	}
	// The unlike site's own T-learner finds its larger effect.
	mean := func(v []float64) float64 {
		s := 0.0
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	own, _ := res.CATE(ctx, 4, 1, data[1])
	pooled, _ := res.CATE(ctx, 2, 1, data[1])
	if mean(own) < mean(pooled)+1 {
		t.Errorf("site 1's own T-learner ATE %.3f, the pooled one's %.3f: want the own one about 1.5 higher", mean(own), mean(pooled))
	}
}

func TestLocaliseRefuses(t *testing.T) {
	e := Estimator{Kind: KindSiteTLearner, Ridge: 1}
	if _, err := e.Localise(Stats{}); !errors.Is(err, ErrInput) {
		t.Errorf("without statistics: %v, want ErrInput", err)
	}
	p := 3
	st := Stats{Arms: [2]*estimator.RidgeStats{estimator.NewRidgeStats(p), estimator.NewRidgeStats(p)}}
	if _, err := (Estimator{Kind: KindSiteDR, Ridge: 1}).Localise(st); !errors.Is(err, ErrInput) {
		t.Errorf("a DR-learner without the DR statistics: %v, want ErrInput", err)
	}
	st.Noise[0] = 1
	if _, err := e.Localise(st); !errors.Is(err, ErrInput) {
		t.Errorf("noised statistics: %v, want ErrInput", err)
	}
	// Other kinds pass through without statistics.
	if got, err := (Estimator{Kind: KindLatent}).Localise(Stats{}); err != nil || got.Kind != KindLatent {
		t.Errorf("latent: %v, %v", got, err)
	}
}

// TestSiteScores: under a choice per site, each site's scores say how its
// choice came about: its best has difference 0, its members are within z
// pooled standard errors, and its own differences are those of its own
// rows alone.
func TestSiteScores(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 5))
	sites := []Pairs{sitePairs(t, r, 200, 0), sitePairs(t, r, 200, 0), sitePairs(t, r, 300, 2)}
	var pooled Pairs
	centres := make([]Centre, len(sites))
	for s, p := range sites {
		if err := pooled.Add(p); err != nil {
			t.Fatal(err)
		}
		centres[s] = Centre{CATE: make([]float64, 2)}
	}
	_, ens, err := Decide(pooled, centres, DefaultZ)
	if err != nil {
		t.Fatal(err)
	}
	if sc, err := ens.Scores(0, &sites[0]); sc != nil || err != nil {
		t.Fatalf("the federation's ensemble has site scores %+v (%v)", sc, err)
	}
	if ens, err = CombineBySite(ens, sites, centres, DefaultZ); err != nil {
		t.Fatal(err)
	}
	for s := range sites {
		sc, err := ens.Scores(s, &sites[s])
		if err != nil || sc == nil {
			t.Fatalf("site %d: %+v, %v", s, sc, err)
		}
		if sc.Diff[sc.Best] != 0 || sc.Own[sc.Best] != 0 {
			t.Errorf("site %d: its best %d has differences %v and %v", s, sc.Best, sc.Diff[sc.Best], sc.Own[sc.Best])
		}
		for a := range sc.Diff {
			if in := sc.Diff[a] <= DefaultZ*sc.DiffSE[a]; in != slices.Contains(ens.SiteMembers(s), a) {
				t.Errorf("site %d, candidate %d: pooled difference %v ± %v, members %v", s, a, sc.Diff[a], sc.DiffSE[a], ens.SiteMembers(s))
			}
		}
		sums, _ := sites[s].Sums(sc.Best)
		other := 1 - sc.Best
		if want := sums[other].Diff / sums[other].N; sc.Own[other] != want {
			t.Errorf("site %d: own difference %v, want %v", s, sc.Own[other], want)
		}
	}
	// Site 2's effect (2) favours candidate 1, the others' candidate 0.
	if b0, _ := ens.Scores(0, &sites[0]); b0.Best != 0 {
		t.Errorf("site 0's best is %d, want 0", b0.Best)
	}
	if b2, _ := ens.Scores(2, &sites[2]); b2.Best != 1 {
		t.Errorf("site 2's best is %d, want 1", b2.Best)
	}
}
