package heterogeneity

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/crffd/crffd/inference"
)

// TestBuckets: every bucket holds at least least rows, of one part, and
// the buckets hold every row once; a part too small for a bucket is
// refused.
func TestBuckets(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	_, _, cate, psi := draw(r, 157, func(x float64) float64 { return 1 + x }, 0.3, 1)
	parts := make([]bool, len(cate))
	for i, c := range cate {
		parts[i] = c > 1.3
	}
	rows, keys, err := bucketRows(cate, parts, 0.05, 10)
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]int, len(cate))
	for g, rs := range rows {
		if len(rs) < 10 {
			t.Errorf("bucket %d holds %d rows", g, len(rs))
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, i := range rs {
			seen[i]++
			if parts[i] != parts[rs[0]] {
				t.Errorf("bucket %d mixes the parts", g)
			}
			lo, hi = math.Min(lo, cate[i]), math.Max(hi, cate[i])
		}
		// The key is the middle of the bins from the lowest τ̂'s to the highest's.
		if want := (math.Floor(lo/0.05) + math.Floor(hi/0.05) + 1) / 2 * 0.05; math.Abs(keys[g]-want) > 1e-12 {
			t.Errorf("bucket %d of τ̂ in [%v, %v] has key %v, want %v", g, lo, hi, keys[g], want)
		}
	}
	if slices.ContainsFunc(seen, func(k int) bool { return k != 1 }) {
		t.Errorf("rows in buckets: %v", seen)
	}
	bs, err := NewBuckets(psi, cate, parts, 0.05, 10)
	if err != nil {
		t.Fatal(err)
	}
	var treated, fromBuckets inference.Sums
	for i, p := range psi {
		if parts[i] {
			treated = treated.Add(inference.Sums{N: 1, Sum: p, SumSq: p * p})
		}
	}
	for g, b := range bs {
		if parts[rows[g][0]] {
			fromBuckets = fromBuckets.Add(b.Sums)
		}
	}
	if treated.N != fromBuckets.N || math.Abs(treated.Sum-fromBuckets.Sum) > 1e-9 {
		t.Errorf("the part's sums %+v, its buckets' %+v", treated, fromBuckets)
	}
	small := make([]bool, len(cate))
	small[3] = true
	if _, err := NewBuckets(psi, cate, small, 0.05, 10); !errors.Is(err, ErrInput) {
		t.Errorf("a part of one row: %v", err)
	}
	if _, err := NewBuckets(psi, cate, nil, 0, 10); !errors.Is(err, ErrInput) {
		t.Errorf("bins of width 0: %v", err)
	}
}

// TestRankedIsTheTiedRanking: the statistics of pooled buckets of three
// sets of rows are those of the pooled rows ranked by their bucket's key,
// ties averaged: the AUTOC and the Qini of NewRATE on those keys, the TOC
// of tie-averaged weights, and GATES whose fifths hold about a fifth of
// the rows each.
func TestRankedIsTheTiedRanking(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	var all []Bucket
	var psi, key []float64
	for s := range 3 {
		_, _, cate, p := draw(r, 120+40*s, func(x float64) float64 { return 2 + x + float64(s) }, 0.5, 2)
		rows, keys, err := bucketRows(cate, nil, 0.1, 10)
		if err != nil {
			t.Fatal(err)
		}
		bs, err := NewBuckets(p, cate, nil, 0.1, 10)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, bs...)
		for g, rs := range rows {
			for _, i := range rs {
				psi, key = append(psi, p[i]), append(key, keys[g])
			}
		}
	}
	got, err := NewRanked(all)
	if err != nil {
		t.Fatal(err)
	}
	want, err := NewRATE(psi, key)
	if err != nil {
		t.Fatal(err)
	}
	close := func(what string, a, b inference.Estimate) {
		if math.Abs(a.Estimate-b.Estimate) > 1e-9 || math.Abs(a.SE-b.SE) > 1e-9 || a.N != b.N {
			t.Errorf("%s: %+v from the buckets, %+v from the rows", what, a, b)
		}
	}
	close("AUTOC", got.AUTOC, want.AUTOC)
	close("Qini", got.Qini, want.Qini)
	// The TOC with tie-averaged weights, from the rows.
	n := len(psi)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case key[a] > key[b]:
			return -1
		case key[a] < key[b]:
			return 1
		}
		return 0
	})
	for _, pt := range got.TOC {
		k := max(2, int(math.Round(pt.Q*float64(n))))
		w := make([]float64, n)
		for j := range w {
			w[j] = -1
			if j < k {
				w[j] = float64(n)/float64(k) - 1
			}
		}
		for lo := 0; lo < n; {
			hi := lo + 1
			for hi < n && key[order[hi]] == key[order[lo]] {
				hi++
			}
			var m float64
			for j := lo; j < hi; j++ {
				m += w[j] / float64(hi-lo)
			}
			for j := lo; j < hi; j++ {
				w[j] = m
			}
			lo = hi
		}
		v := make([]float64, n)
		for j, i := range order {
			v[j] = w[j] * psi[i]
		}
		e, err := inference.Accumulate(v).Estimate()
		if err != nil {
			t.Fatal(err)
		}
		close("TOC", pt.TOC, e)
	}
	total := 0
	for k, g := range got.GATES {
		total += g.N
		if math.Abs(float64(g.N)-float64(n)/Fifths) > 20 {
			t.Errorf("fifth %d holds %d of %d rows", k+1, g.N, n)
		}
	}
	if total != n || !(got.GATES[4].Estimate > got.GATES[0].Estimate) {
		t.Errorf("GATES %+v over %d of %d rows; want every row, rising", got.GATES, total, n)
	}
	if _, err := NewRanked(all[:0]); !errors.Is(err, ErrInput) {
		t.Errorf("no buckets: %v", err)
	}
}

// TestRankedCoversTheTruth: over 200 replicates of three sites' held-out
// rows (τ = 2 + x, τ̂ = τ + N(0, 0.5²), ψ = τ + noise of sd 2 growing with
// |x|), the intervals of the pooled buckets' GATES, AUTOC and TOC cover
// their estimands, the same statistics of the buckets' true effects, in
// at least 0.9 of replicates for every fifth and every TOC point, not
// merely on average.
func TestRankedCoversTheTruth(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const reps = 200
	cover := make([]int, Fifths+2+9) // the fifths, AUTOC, Qini, the TOC points
	for range reps {
		var est, truth []Bucket
		for s := range 3 {
			_, tau, cate, psi := draw(r, 150+50*s, func(x float64) float64 { return 2 + x }, 0.5, 2)
			rows, keys, err := bucketRows(cate, nil, 0.05, 10)
			if err != nil {
				t.Fatal(err)
			}
			for g, rs := range rows {
				var e, tr inference.Sums
				for _, i := range rs {
					e = e.Add(inference.Sums{N: 1, Sum: psi[i], SumSq: psi[i] * psi[i]})
					tr = tr.Add(inference.Sums{N: 1, Sum: tau[i], SumSq: tau[i] * tau[i]})
				}
				est, truth = append(est, Bucket{Key: keys[g], Sums: e}), append(truth, Bucket{Key: keys[g], Sums: tr})
			}
		}
		got, err := NewRanked(est)
		if err != nil {
			t.Fatal(err)
		}
		want, err := NewRanked(truth)
		if err != nil {
			t.Fatal(err)
		}
		pairs := [][2]inference.Estimate{}
		for k := range got.GATES {
			pairs = append(pairs, [2]inference.Estimate{got.GATES[k], want.GATES[k]})
		}
		pairs = append(pairs, [2]inference.Estimate{got.AUTOC, want.AUTOC}, [2]inference.Estimate{got.Qini, want.Qini})
		for k := range got.TOC {
			pairs = append(pairs, [2]inference.Estimate{got.TOC[k].TOC, want.TOC[k].TOC})
		}
		for k, p := range pairs {
			if p[0].Lower <= p[1].Estimate && p[1].Estimate <= p[0].Upper {
				cover[k]++
			}
		}
	}
	worst := 1.0
	for k, c := range cover {
		rate := float64(c) / reps
		worst = math.Min(worst, rate)
		if rate < 0.9 {
			t.Errorf("statistic %d (fifths, AUTOC, Qini, TOC 10%%…90%%) covers its truth in %.3f of %d replicates", k, rate, reps)
		}
	}
	t.Logf("coverage by statistic %v of %d; worst %.3f", cover, reps, worst)
}
