// Package audit checks, on a site's own rows, the sensitivity that the
// privacy accountant assumes of private training.
//
// The accountant (package privacy) charges each private round as the
// Gaussian mechanism on a sum whose L2 sensitivity is the clip norm C:
// adding or removing one row moves the round's clipped sum by at most C
// (the add/remove relation), and replacing one row by another by at most
// 2C (replace-one). That is a property of neighbouring datasets, not of
// one code path: a row whose contribution depended on the other rows (its
// noise draws keyed by its position, a batch drawn by permuting
// positions) would move every other row's term when it leaves. Run
// measures it directly. For each model, batch mode and sampled row i it
// computes the clipped round sum with the noise off (estimator.ClippedSum)
// on the site's rows D, on D without row i, and on D with row i replaced
// by another of its rows, at one setup, input and round, and reports the
// largest ‖Δ‖/C of each relation beside the bound.
package audit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/floats"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/glm"
)

// StatNuisance is Result.Statistic of the nuisance models' statistics.
const StatNuisance = "nuisance statistics"

// Relations, as Result.Relation names them.
const (
	AddRemove  = "add/remove"
	ReplaceOne = "replace-one"
)

// Bound returns the largest ‖Δ‖/C the accountant assumes under relation:
// 1 for add/remove, 2 for replace-one.
func Bound(relation string) float64 {
	if relation == ReplaceOne {
		return 2
	}
	return 1
}

// Options configure Run.
type Options struct {
	Clip float64 // C; 0 means 1
	// Rows is how many of the site's rows are removed and replaced in
	// turn: the first control and the first treated row, then rows
	// sampled without replacement; 0 means 20, and a number above the
	// site's rows means every row.
	Rows int
	// Rate is the Poisson sampling rate of the mini-batch mode: each row
	// joins a round with this probability. 0 audits full batches alone.
	Rate float64
	// Seed draws the sampled rows, the replacements and the input weights.
	Seed uint64
	// Kinds are the models audited; empty means every model. The
	// nuisance models' statistics (estimator.Setup.NuisanceStats) are
	// audited after them, against their sensitivity glm.Sensitivity.
	Kinds []estimator.Kind
}

// Result is the audit of one model, batch mode and relation.
type Result struct {
	Model estimator.Kind
	// Statistic names an audited release other than a model's training
	// round (StatNuisance); empty for a model's.
	Statistic string
	Rate      float64 // the Poisson sampling rate; 1 for a full batch
	Relation  string  // AddRemove or ReplaceOne
	Rows      int     // rows audited
	// Ratio is the largest ‖M(D) − M(D′)‖/C over the audited rows, at Row
	// (a row number of the site's data, 0-based); for a Statistic, C is
	// the sensitivity the accountant assumes of it.
	Ratio float64
	Row   int
	Bound float64 // what the accountant assumes: Bound(Relation)
}

// OK reports whether the measured ratio is within the bound, up to
// rounding.
func (r Result) OK() bool { return r.Ratio <= r.Bound*(1+1e-9) }

// Run audits private training on data under setup, whose Config must name
// the Adam optimiser (private training needs it). It returns one Result
// per model, batch mode and relation: models in estimator.Kinds order,
// the full batch before the mini-batch, add/remove before replace-one.
func Run(ctx context.Context, data *estimator.Data, setup *estimator.Setup, opts Options) ([]Result, error) {
	if data == nil || setup == nil {
		return nil, errors.New("audit: nil data or setup")
	}
	n := data.Rows()
	if n < 2 {
		return nil, fmt.Errorf("audit: %d rows; removing and replacing a row needs at least 2", n)
	}
	clip := opts.Clip
	if clip == 0 {
		clip = 1
	}
	if !(clip > 0) || math.IsInf(clip, 0) {
		return nil, fmt.Errorf("audit: clip %v must be positive and finite", opts.Clip)
	}
	if !(opts.Rate >= 0 && opts.Rate < 1) {
		return nil, fmt.Errorf("audit: sampling rate %v must be in [0, 1)", opts.Rate)
	}
	k := opts.Rows
	if k == 0 {
		k = 20
	}
	if k < 0 {
		return nil, fmt.Errorf("audit: %d rows to audit", opts.Rows)
	}
	k = min(k, n)
	kinds := opts.Kinds
	if len(kinds) == 0 {
		kinds = estimator.Kinds
	}
	rates := []float64{1}
	if opts.Rate > 0 {
		rates = append(rates, opts.Rate)
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x6175646974)) // "audit"
	rows := auditedRows(data, k, rng)
	with := make([]int, k) // the row that replaces rows[r]
	for r, i := range rows {
		j := rng.IntN(n - 1)
		if j >= i {
			j++
		}
		with[r] = j
	}
	// One secret row key for every neighbour, as one site keeps one.
	var key [32]byte
	for i := range key {
		key[i] = byte(rng.Uint32())
	}
	var out []Result
	for _, kind := range kinds {
		in, err := input(kind, setup, rng)
		if err != nil {
			return nil, err
		}
		for _, q := range rates {
			priv := estimator.Privacy{Clip: clip, Rate: q, Key: key}
			res := [2]Result{
				{Model: kind, Rate: q, Relation: AddRemove, Rows: k, Row: -1, Bound: Bound(AddRemove)},
				{Model: kind, Rate: q, Relation: ReplaceOne, Rows: k, Row: -1, Bound: Bound(ReplaceOne)},
			}
			// A row sits out a round of a Poisson sample with probability
			// 1 − q, and then moves nothing: each row is audited at the
			// first of a few rounds at which it moves the sum.
			rounds := 1
			if q < 1 {
				rounds = min(32, int(math.Ceil(4/q)))
			}
			bases := make([][]float64, rounds)
			for r, i := range rows {
				for rel := range res {
					d := neighbour(data, i, with[r], rel == 1)
					for round := range rounds {
						in.Round = 3 + round
						if bases[round] == nil {
							if bases[round], err = clippedSum(ctx, data, setup, priv, in); err != nil {
								return nil, err
							}
						}
						v, err := clippedSum(ctx, d, setup, priv, in)
						if err != nil {
							return nil, fmt.Errorf("audit: %v model, row %d: %w", kind, i, err)
						}
						floats.Sub(v, bases[round])
						ratio := floats.Norm(v, 2) / clip
						if ratio > res[rel].Ratio || res[rel].Row < 0 {
							res[rel].Ratio, res[rel].Row = ratio, i
						}
						if ratio > 0 {
							break
						}
					}
				}
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			out = append(out, res[:]...)
		}
	}
	res, err := auditNuisance(data, setup, rows, with)
	if err != nil {
		return nil, err
	}
	return append(out, res...), nil
}

// auditNuisance audits the nuisance models' statistics on the neighbours
// of data without, or with replaced, each of rows.
func auditNuisance(data *estimator.Data, setup *estimator.Setup, rows, with []int) ([]Result, error) {
	stats := func(d *estimator.Data) ([]float64, error) {
		s, err := setup.NuisanceStats(d)
		return s.Vector(), err
	}
	base, err := stats(data)
	if err != nil {
		return nil, fmt.Errorf("audit: nuisance statistics: %w", err)
	}
	_, dx := data.X.Dims()
	sens := glm.Sensitivity(dx)
	res := [2]Result{
		{Statistic: StatNuisance, Rate: 1, Relation: AddRemove, Rows: len(rows), Row: -1, Bound: Bound(AddRemove)},
		{Statistic: StatNuisance, Rate: 1, Relation: ReplaceOne, Rows: len(rows), Row: -1, Bound: Bound(ReplaceOne)},
	}
	for r, i := range rows {
		for rel := range res {
			v, err := stats(neighbour(data, i, with[r], rel == 1))
			if err != nil {
				return nil, fmt.Errorf("audit: nuisance statistics, row %d: %w", i, err)
			}
			floats.Sub(v, base)
			if ratio := floats.Norm(v, 2) / sens; ratio > res[rel].Ratio || res[rel].Row < 0 {
				res[rel].Ratio, res[rel].Row = ratio, i
			}
		}
	}
	return res[:], nil
}

// auditedRows returns k of data's rows: the first control and the first
// treated row, whose removal would shift every other row of its arm were a
// row's terms keyed by its position, then rows drawn at random.
func auditedRows(data *estimator.Data, k int, rng *rand.Rand) []int {
	var rows []int
	for _, arm := range []float64{0, 1} {
		if i := slices.Index(data.W, arm); i >= 0 && len(rows) < k {
			rows = append(rows, i)
		}
	}
	for _, i := range rng.Perm(data.Rows()) {
		if len(rows) == k {
			break
		}
		if !slices.Contains(rows, i) {
			rows = append(rows, i)
		}
	}
	return rows
}

// neighbour returns data without row i, or with row i replaced by row j.
func neighbour(data *estimator.Data, i, j int, replace bool) *estimator.Data {
	n := data.Rows()
	idx := make([]int, 0, n)
	for r := range n {
		switch {
		case r != i:
			idx = append(idx, r)
		case replace:
			idx = append(idx, j)
		}
	}
	return data.Subset(idx)
}

// input returns model kind's round input at the coordinator's initial
// parameters moved by seeded normal draws, so that no gradient vanishes.
func input(kind estimator.Kind, setup *estimator.Setup, rng *rand.Rand) (*estimator.SiteInput, error) {
	c, err := estimator.NewCoordinator(kind, 1, setup)
	if err != nil {
		return nil, err
	}
	in := c.Inputs()[0]
	in.Noise = 3
	for _, w := range in.Weights {
		raw := w.RawMatrix()
		for r := range raw.Rows {
			for j := range raw.Cols {
				raw.Data[r*raw.Stride+j] += 0.5 * rng.NormFloat64()
			}
		}
	}
	return in, nil
}

// clippedSum returns the clipped sum of a private site holding data alone.
func clippedSum(ctx context.Context, data *estimator.Data, setup *estimator.Setup, priv estimator.Privacy, in *estimator.SiteInput) ([]float64, error) {
	s, err := estimator.NewSite(0, data, setup)
	if err != nil {
		return nil, err
	}
	if err := s.SetPrivacy(&priv); err != nil {
		return nil, err
	}
	v, _, err := s.ClippedSum(ctx, in)
	return v, err
}
