package heterogeneity

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/crffd/crffd/inference"
)

// A Bucket is a set of at least a few rows of one site, close in τ̂, that
// a federation ranks as ties: its sums of ψ and its place Key in the
// ranking by τ̂. Buckets of several sites, pooled (Ranked), give GATES, the
// RATE and the TOC over every site's rows without a cut point of τ̂ that
// is one row's value.
type Bucket struct {
	Key float64 // the middle of the bucket's bins: its place in the ranking by τ̂
	inference.Sums
}

// NewBuckets groups rows with scores psi and estimates cate into buckets
// of at least least rows each: the rows are binned on the grid of
// multiples of width, and consecutive bins, from the lowest, are merged
// until they hold least rows; a last run of fewer joins the bucket below
// it. With parts (nil: one part) the rows of each part are bucketed
// apart, so that any sum over a part is a sum of buckets. A part of 1 to
// least − 1 rows is refused: its bucket would be too small.
func NewBuckets(psi, cate []float64, parts []bool, width float64, least int) ([]Bucket, error) {
	if len(psi) != len(cate) {
		return nil, fmt.Errorf("%w: %d scores and %d estimates", ErrInput, len(psi), len(cate))
	}
	for i, p := range psi {
		if !finite(p) {
			return nil, fmt.Errorf("%w: row %d: score %v", ErrInput, i, p)
		}
	}
	rows, keys, err := bucketRows(cate, parts, width, least)
	if err != nil {
		return nil, err
	}
	out := make([]Bucket, len(rows))
	for g, r := range rows {
		out[g].Key = keys[g]
		for _, i := range r {
			out[g].Sums = out[g].Sums.Add(inference.Sums{N: 1, Sum: psi[i], SumSq: psi[i] * psi[i]})
		}
	}
	return out, nil
}

// bucketRows returns the rows of each bucket of NewBuckets and its Key.
func bucketRows(cate []float64, parts []bool, width float64, least int) ([][]int, []float64, error) {
	n := len(cate)
	switch {
	case parts != nil && len(parts) != n:
		return nil, nil, fmt.Errorf("%w: %d estimates and %d parts", ErrInput, n, len(parts))
	case !(width > 0) || math.IsInf(width, 0) || least < 1:
		return nil, nil, fmt.Errorf("%w: bins of width %v, buckets of %d rows", ErrInput, width, least)
	}
	for i, c := range cate {
		if !finite(c) {
			return nil, nil, fmt.Errorf("%w: row %d: estimate %v", ErrInput, i, c)
		}
	}
	bin := func(i int) float64 { return math.Floor(cate[i] / width) }
	var out [][]int
	var keys []float64
	for _, part := range []bool{false, true} {
		var rows []int
		for i := range n {
			if parts == nil && !part || parts != nil && parts[i] == part {
				rows = append(rows, i)
			}
		}
		if len(rows) == 0 {
			continue
		}
		if len(rows) < least {
			return nil, nil, fmt.Errorf("%w: a part of %d rows, fewer than a bucket's %d", ErrInput, len(rows), least)
		}
		slices.SortStableFunc(rows, func(a, b int) int { return cmp.Compare(bin(a), bin(b)) })
		for lo := 0; lo < len(rows); {
			hi := lo
			// Whole bins, until the bucket holds least rows.
			for hi < len(rows) && (hi-lo < least || bin(rows[hi]) == bin(rows[hi-1])) {
				hi++
			}
			if len(rows)-hi < least {
				hi = len(rows) // too few left for a bucket of their own
			}
			out = append(out, rows[lo:hi])
			keys = append(keys, (bin(rows[lo])+bin(rows[hi-1])+1)/2*width)
			lo = hi
		}
	}
	return out, keys, nil
}

// Ranked are the statistics of pooled buckets ranked by Key, the rows of
// a bucket tied: GATES, whose groups are fifths of the rows, each bucket
// in the fifth of its middle row; and the RATE and the TOC of package
// doc, each row's weight the mean of its bucket's positions' weights.
type Ranked struct {
	GATES       []inference.Estimate
	TopMinusLow inference.Estimate
	RATE
}

// NewRanked returns the statistics of the buckets bs (of every site).
func NewRanked(bs []Bucket) (*Ranked, error) {
	bs = slices.Clone(bs)
	slices.SortStableFunc(bs, func(a, b Bucket) int { return cmp.Compare(a.Key, b.Key) })
	n := 0
	for _, b := range bs {
		if b.N < 1 || !finite(b.Key) || !finite(b.Sum) || !finite(b.SumSq) {
			return nil, fmt.Errorf("%w: bucket %+v", ErrInput, b)
		}
		n += b.N
	}
	if n < 2*Fifths {
		return nil, fmt.Errorf("%w: %d rows in buckets; the statistics need %d", ErrInput, n, 2*Fifths)
	}
	out := &Ranked{GATES: make([]inference.Estimate, Fifths)}
	groups := make([]inference.Sums, Fifths)
	start := 0 // the position, from the lowest, of the bucket's first row
	for _, b := range bs {
		mid := start + (b.N-1)/2
		groups[min(Fifths-1, mid*Fifths/n)] = groups[min(Fifths-1, mid*Fifths/n)].Add(b.Sums)
		start += b.N
	}
	var err error
	for k, g := range groups {
		if out.GATES[k], err = g.Estimate(); err != nil {
			return nil, fmt.Errorf("%w: fifth %d: %w", ErrInput, k+1, err)
		}
	}
	top, low := out.GATES[Fifths-1], out.GATES[0]
	out.TopMinusLow = estimate(top.Estimate-low.Estimate, math.Hypot(top.SE, low.SE), top.N+low.N)

	rate, err := rankedRATE(bs)
	if err != nil {
		return nil, err
	}
	out.RATE = *rate
	return out, nil
}
