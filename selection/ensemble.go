package selection

import (
	"fmt"
	"math"
	"slices"
)

// Pairs are the validation sums over the rows and pairs of candidates that
// the selection needs: N rows, Loss[a·C+b] = Σ l_a·l_b of the losses
// l = (ψ − τ̂)² (the paired differences between any two candidates) and
// Res[a·C+b] = Σ e_a·e_b of the residuals e = ψ − τ̂ (Σl on the diagonal,
// and the loss of any average of candidates). They add over sites, and
// every candidate's Sums derive from them (Sums).
type Pairs struct {
	C         int
	N         float64
	Loss, Res []float64
}

// NewPairs returns zero Pairs of c candidates.
func NewPairs(c int) Pairs {
	return Pairs{C: c, Loss: make([]float64, c*c), Res: make([]float64, c*c)}
}

// Add adds o to p; zero Pairs become a copy of o.
func (p *Pairs) Add(o Pairs) error {
	if p.C == 0 && p.Loss == nil {
		*p = NewPairs(o.C)
	}
	if p.C != o.C || len(o.Loss) != o.C*o.C || len(o.Res) != o.C*o.C {
		return fmt.Errorf("%w: pair sums of %d and %d candidates", ErrInput, p.C, o.C)
	}
	p.N += o.N
	for i := range p.Loss {
		p.Loss[i] += o.Loss[i]
		p.Res[i] += o.Res[i]
	}
	return nil
}

// Sums returns every candidate's Sums, its paired differences against
// candidate ref.
func (p Pairs) Sums(ref int) ([]Sums, error) {
	c := p.C
	if ref < 0 || ref >= c {
		return nil, fmt.Errorf("%w: reference %d of %d candidates", ErrInput, ref, c)
	}
	if len(p.Loss) != c*c || len(p.Res) != c*c {
		return nil, fmt.Errorf("%w: pair sums of %d and %d values for %d candidates", ErrInput, len(p.Loss), len(p.Res), c)
	}
	r := ref*c + ref
	out := make([]Sums, c)
	for a := range out {
		aa := a*c + a
		out[a] = Sums{N: p.N, Loss: p.Res[aa], LossSq: p.Loss[aa], Diff: p.Res[aa] - p.Res[r]}
		if a != ref {
			out[a].DiffSq = p.Loss[aa] - 2*p.Loss[a*c+ref] + p.Loss[r]
		}
	}
	return out, nil
}

// PairSums returns the Pairs of the candidates' CATEs cates[c] on the
// rows with pseudo-outcomes psi.
func PairSums(psi []float64, cates [][]float64) (Pairs, error) {
	c := len(cates)
	for a, tau := range cates {
		if len(tau) != len(psi) {
			return Pairs{}, fmt.Errorf("%w: candidate %d has %d CATEs for %d rows", ErrInput, a, len(tau), len(psi))
		}
	}
	p := NewPairs(c)
	p.N = float64(len(psi))
	e := make([]float64, c)
	l := make([]float64, c)
	for i, v := range psi {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Pairs{}, fmt.Errorf("%w: pseudo-outcome of row %d is %v", ErrInput, i, v)
		}
		for a, tau := range cates {
			e[a] = v - tau[i]
			l[a] = e[a] * e[a]
			if math.IsNaN(l[a]) || math.IsInf(l[a], 0) {
				return Pairs{}, fmt.Errorf("%w: candidate %d: CATE of row %d is %v", ErrInput, a, i, tau[i])
			}
		}
		for a := range c {
			for b := range c {
				p.Loss[a*c+b] += l[a] * l[b]
				p.Res[a*c+b] += e[a] * e[b]
			}
		}
	}
	return p, nil
}

// Centre are the sums that re-centre the chosen CATE on the doubly robust
// ATE, over all of the rows of the sites that hold rows out: n, Σψ, Σψ²
// and, per candidate, Σ τ̂_c. They add over sites.
type Centre struct {
	N, Psi, PsiSq float64
	CATE          []float64
}

// Add adds o to c; a zero Centre becomes a copy of o.
func (c *Centre) Add(o Centre) error {
	if c.CATE == nil {
		c.CATE = make([]float64, len(o.CATE))
	}
	if len(c.CATE) != len(o.CATE) {
		return fmt.Errorf("%w: centring sums of %d and %d candidates", ErrInput, len(c.CATE), len(o.CATE))
	}
	c.N += o.N
	c.Psi += o.Psi
	c.PsiSq += o.PsiSq
	for i, v := range o.CATE {
		c.CATE[i] += v
	}
	return nil
}

// CentreSums returns the Centre of rows with pseudo-outcomes psi, where
// cates[c] are candidate c's CATEs of the rows.
func CentreSums(psi []float64, cates [][]float64) (Centre, error) {
	out := Centre{N: float64(len(psi)), CATE: make([]float64, len(cates))}
	for _, v := range psi {
		out.Psi += v
		out.PsiSq += v * v
	}
	for c, tau := range cates {
		if len(tau) != len(psi) {
			return Centre{}, fmt.Errorf("%w: candidate %d has %d CATEs for %d rows", ErrInput, c, len(tau), len(psi))
		}
		for _, v := range tau {
			out.CATE[c] += v
		}
	}
	return out, nil
}

// Ensemble is the estimate the selection gives: the equally weighted mean
// of the Members' CATEs, plus Shift.
type Ensemble struct {
	Members []int   // candidate indices, increasing
	Best    int     // the candidate of least validation loss
	Loss    float64 // the mean's validation loss, before the shift
	// Gap is the doubly robust ATE of the centring rows minus the
	// members' mean CATE there, GapSE the standard error of that ATE, and
	// Shift = Gap·max(0, 1 − GapSE²/Gap²), the gap shrunk by its
	// signal-to-noise ratio (0 without centring rows).
	Gap, GapSE, Shift float64
}

// Decide scores the candidates from their summed Pairs (Scores, the
// first candidate the reference) and forms their Ensemble (Combine).
func Decide(pairs Pairs, centre Centre, z float64) ([]Score, Ensemble, error) {
	sums, err := pairs.Sums(0)
	if err != nil {
		return nil, Ensemble{}, err
	}
	scores, err := Scores(sums, 0)
	if err != nil {
		return nil, Ensemble{}, err
	}
	ens, err := Combine(pairs, centre, z)
	return scores, ens, err
}

// Combine forms the Ensemble from the candidates' summed validation Pairs
// and the Centre sums: its members are the candidates whose mean paired
// loss difference from the best candidate is at most z of its standard
// errors, the candidates the validation rows cannot tell from the best. A
// Centre of no rows leaves the shift 0.
func Combine(pairs Pairs, centre Centre, z float64) (Ensemble, error) {
	c := pairs.C
	if c == 0 || len(pairs.Loss) != c*c || len(pairs.Res) != c*c {
		return Ensemble{}, fmt.Errorf("%w: pair sums of %d candidates", ErrInput, c)
	}
	if z < 0 || math.IsNaN(z) {
		return Ensemble{}, fmt.Errorf("%w: z %v", ErrInput, z)
	}
	n := pairs.N
	if n < 2 {
		return Ensemble{}, fmt.Errorf("%w: %v validation rows, need at least 2", ErrInput, n)
	}
	var e Ensemble
	for a := range c {
		if pairs.Res[a*c+a] < pairs.Res[e.Best*c+e.Best] {
			e.Best = a
		}
	}
	diffs, err := pairs.Sums(e.Best)
	if err != nil {
		return Ensemble{}, err
	}
	for a, d := range diffs {
		if a == e.Best || d.Diff/n <= z*meanSE(d.Diff, d.DiffSq, n) {
			e.Members = append(e.Members, a)
		}
	}
	k := float64(len(e.Members))
	var res float64
	for _, a := range e.Members {
		for _, m := range e.Members {
			res += pairs.Res[a*c+m]
		}
	}
	e.Loss = res / (k * k * n)
	if centre.N >= 2 {
		if len(centre.CATE) != c {
			return Ensemble{}, fmt.Errorf("%w: centring sums of %d candidates, want %d", ErrInput, len(centre.CATE), c)
		}
		var tau float64
		for _, a := range e.Members {
			tau += centre.CATE[a]
		}
		e.Gap = (centre.Psi - tau/k) / centre.N
		e.GapSE = meanSE(centre.Psi, centre.PsiSq, centre.N)
		if g2 := e.Gap * e.Gap; g2 > 0 {
			e.Shift = e.Gap * math.Max(0, 1-e.GapSE*e.GapSE/g2)
		}
	}
	return e, nil
}

// Has reports whether candidate c is a member.
func (e Ensemble) Has(c int) bool {
	_, ok := slices.BinarySearch(e.Members, c)
	return ok
}
