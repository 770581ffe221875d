package heterogeneity

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/inference"
)

// Fifths is the number of groups of GATES and CLAN.
const Fifths = 5

// GATES are the AIPW effects of the groups of rows by quantile of τ̂, from
// the lowest τ̂ to the highest, and the highest minus the lowest.
type GATES struct {
	Groups      []inference.Estimate
	TopMinusLow inference.Estimate
	Rows        [][]int // each group's rows, by index
}

// NewGATES splits the rows into groups of (nearly) equal size by their
// estimates cate (ties go to the lower group in the rows' order) and
// returns each group's AIPW effect, the mean of its scores psi with the
// standard error sd(ψ)/√n, and the top minus the bottom group's, whose
// groups are disjoint and so independent. It needs at least two rows per
// group.
func NewGATES(psi, cate []float64, groups int) (*GATES, error) {
	n := len(psi)
	switch {
	case len(cate) != n:
		return nil, fmt.Errorf("%w: %d scores and %d estimates", ErrInput, n, len(cate))
	case groups < 2 || n < 2*groups:
		return nil, fmt.Errorf("%w: %d rows in %d groups; want at least 2 groups of 2 rows", ErrInput, n, groups)
	}
	order, err := ranking(psi, cate, false)
	if err != nil {
		return nil, err
	}
	g := &GATES{Groups: make([]inference.Estimate, groups), Rows: make([][]int, groups)}
	for k := range groups {
		g.Rows[k] = order[k*n/groups : (k+1)*n/groups]
		if g.Groups[k], err = meanOf(psi, g.Rows[k]); err != nil {
			return nil, err
		}
	}
	top, low := g.Groups[groups-1], g.Groups[0]
	g.TopMinusLow = estimate(top.Estimate-low.Estimate, math.Hypot(top.SE, low.SE), top.N+low.N)
	return g, nil
}

// CLAN is a covariate's mean in the top and the bottom group of GATES,
// and the difference, with Welch's standard error.
type CLAN struct {
	Column           int
	Top, Low, Spread inference.Estimate
}

// NewCLAN returns the CLAN of each column of x, whose rows are the rows of
// g.
func NewCLAN(g *GATES, x mat.Matrix) ([]CLAN, error) {
	_, d := x.Dims()
	top, low := g.Rows[len(g.Rows)-1], g.Rows[0]
	out := make([]CLAN, d)
	for j := range d {
		col := mat.Col(nil, j, x)
		for i, v := range col {
			if !finite(v) {
				return nil, fmt.Errorf("%w: row %d, column %d: %v", ErrInput, i, j, v)
			}
		}
		t, err := meanOf(col, top)
		if err != nil {
			return nil, err
		}
		l, err := meanOf(col, low)
		if err != nil {
			return nil, err
		}
		out[j] = CLAN{Column: j, Top: t, Low: l, Spread: estimate(t.Estimate-l.Estimate, math.Hypot(t.SE, l.SE), t.N+l.N)}
	}
	return out, nil
}

// RATE are the rank-weighted average treatment effects of the ranking by
// τ̂, and the TOC curve at q = 0.1, 0.2, …, 0.9 (at 1 it is 0).
type RATE struct {
	AUTOC, Qini inference.Estimate
	TOC         []TOCPoint
}

// TOCPoint is the TOC at the share Q of rows: the mean ψ of the Q of rows
// with the largest τ̂ minus the mean of all, with the standard error of a
// difference of means over nested rows.
type TOCPoint struct {
	Q   float64
	TOC inference.Estimate
}

// NewRATE returns the AUTOC and the Qini of the ranking of the rows by
// cate, largest first, with scores psi. On n rows, with ψ_(j) the score of
// the j-th row,
//
//	AUTOC = (1/n) Σ_j ψ_(j) (H_n − H_{j−1} − 1),   H_k = Σ_{i≤k} 1/i,
//	Qini  = (1/n) Σ_j ψ_(j) ((n − j + 1)/n − (n + 1)/(2n)),
//
// which are ∫TOC and ∫q·TOC over q = k/n. Rows with equal τ̂ share their
// weights' mean, the TOC's too, so that the order of ties does not
// matter. Each is the
// mean of the scores a_j·ψ_(j), whose standard error sd/√n holds the
// ranking fixed.
func NewRATE(psi, cate []float64) (*RATE, error) {
	n := len(psi)
	if len(cate) != n || n < 3 {
		return nil, fmt.Errorf("%w: %d scores and %d estimates; want at least 3 of each", ErrInput, n, len(cate))
	}
	order, err := ranking(psi, cate, false)
	if err != nil {
		return nil, err
	}
	// Each row is a bucket of its own, ranked by its τ̂ (ties share one
	// weight, as the pooled buckets of sites do: rankedRATE).
	bs := make([]Bucket, n)
	for j, i := range order {
		bs[j] = Bucket{Key: cate[i], Sums: inference.Sums{N: 1, Sum: psi[i], SumSq: psi[i] * psi[i]}}
	}
	return rankedRATE(bs)
}

// rankedRATE returns the RATE and the TOC of buckets bs ordered by Key,
// lowest first, ranked from the largest: each row's weight (NewRATE) is
// the mean of the weights of its tie's positions, buckets of equal Key
// one tie. Each figure is then the mean of the rows' a·ψ, whose sums
// follow from each bucket's Σψ and Σψ².
func rankedRATE(bs []Bucket) (*RATE, error) {
	n := 0
	for _, b := range bs {
		n += b.N
	}
	fn := float64(n)
	h := make([]float64, n+1) // h[k] = H_k
	for k := 1; k <= n; k++ {
		h[k] = h[k-1] + 1/float64(k)
	}
	weighted := func(w func(j int) float64) (inference.Estimate, error) {
		var s inference.Sums
		j := 1 // the position of the largest tie's first row
		for hi := len(bs); hi > 0; {
			lo, rows := hi-1, bs[hi-1].N
			for lo > 0 && bs[lo-1].Key == bs[hi-1].Key {
				lo--
				rows += bs[lo].N
			}
			var m float64
			for p := j; p < j+rows; p++ {
				m += w(p)
			}
			m /= float64(rows)
			for _, b := range bs[lo:hi] {
				s = s.Add(inference.Sums{N: b.N, Sum: m * b.Sum, SumSq: m * m * b.SumSq})
			}
			j, hi = j+rows, lo
		}
		return s.Estimate()
	}
	r := &RATE{}
	var err error
	if r.AUTOC, err = weighted(func(j int) float64 { return h[n] - h[j-1] - 1 }); err != nil {
		return nil, err
	}
	if r.Qini, err = weighted(func(j int) float64 { return (fn-float64(j)+1)/fn - (fn+1)/(2*fn) }); err != nil {
		return nil, err
	}
	for t := 1; t <= 9; t++ { // TOC(1) is 0 by definition
		q := float64(t) / 10
		k := max(2, int(math.Round(q*fn)))
		// TOC(q) = mean of the top k − mean of all = (1/k − 1/n)·Σtop − (1/n)·Σrest,
		// a weighted mean of the scores.
		e, err := weighted(func(j int) float64 {
			if j <= k {
				return fn/float64(k) - 1
			}
			return -1
		})
		if err != nil {
			return nil, err
		}
		r.TOC = append(r.TOC, TOCPoint{Q: q, TOC: e})
	}
	return r, nil
}

// ranking returns the rows' indices ordered by cate, ascending or, with
// desc, descending; ties keep the rows' order.
func ranking(psi, cate []float64, desc bool) ([]int, error) {
	order := make([]int, len(cate))
	for i := range order {
		if !finite(psi[i]) || !finite(cate[i]) {
			return nil, fmt.Errorf("%w: row %d: score %v, estimate %v", ErrInput, i, psi[i], cate[i])
		}
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if desc {
			a, b = b, a
		}
		switch {
		case cate[a] < cate[b]:
			return -1
		case cate[a] > cate[b]:
			return 1
		}
		return 0
	})
	return order, nil
}

// meanOf returns the mean of v over rows with the standard error sd/√n.
func meanOf(v []float64, rows []int) (inference.Estimate, error) {
	sub := make([]float64, len(rows))
	for j, i := range rows {
		sub[j] = v[i]
	}
	return inference.Accumulate(sub).Estimate()
}
