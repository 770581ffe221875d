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
	// ResVar and LossVar are the variances of the noise on each entry of
	// Res and of Loss, 0 for exact sums (a private site's SiteSums.Noise
	// sets them); they add over sites.
	ResVar, LossVar float64
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
	p.ResVar += o.ResVar
	p.LossVar += o.LossVar
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
		out[a] = Sums{N: p.N, Loss: p.Res[aa], LossSq: p.Loss[aa], Diff: p.Res[aa] - p.Res[r], LossNoise: p.ResVar}
		if a != ref {
			out[a].DiffSq = p.Loss[aa] - 2*p.Loss[a*c+ref] + p.Loss[r]
			out[a].DiffNoise = 2 * p.ResVar
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

// Centre are a site's sums that re-centre the chosen CATE on its doubly
// robust ATE, over all of its rows: n, Σψ, Σψ² and, per candidate, Σ τ̂_c.
// Combine takes them site by site (Recentre).
//
// A private site (PrivateSiteLosses) sends instead, per candidate, the
// sums Res of its clipped residuals ψ − τ̂_c over its rows and ResSq of
// their squares, whose noise has variances ResVar and ResSqVar per entry;
// Psi, PsiSq and CATE are then 0. N is a row count, always exact.
type Centre struct {
	N, Psi, PsiSq float64
	CATE          []float64
	Res, ResSq    []float64
	// ResVar and ResSqVar are the variances of the noise on each entry
	// of Res and ResSq.
	ResVar, ResSqVar float64
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
// of the Members' CATEs, plus a shift per site.
type Ensemble struct {
	Members []int   // candidate indices, increasing
	Best    int     // the candidate of least validation loss
	Loss    float64 // the mean's validation loss, before the shift
	// Sites are the re-centring at each site, in the order of the
	// Centres given to Combine.
	Sites []Centring
	// Spread is the DerSimonian–Laird estimate of the standard deviation
	// of the sites' gaps about their mean (Recentre); 0 with one site.
	Spread float64
}

// Centring is how the ensemble is re-centred at one site: Gap estimates
// the site's doubly robust ATE minus the members' mean CATE over its rows,
// GapSE is that estimate's standard error, and Shift = Gap·max(0, 1 −
// GapSE²/Gap²), the gap shrunk by its signal-to-noise ratio, is what the
// site adds to the members' mean.
type Centring struct {
	Gap, GapSE, Shift float64
	// Members are the site's own members (CombineBySite), whose mean the
	// shift re-centres; nil: the ensemble's.
	Members []int `json:",omitempty"`
	// Best, Diff and DiffSE are, under a choice per site (CombineBySite),
	// the site's best candidate and every candidate's paired loss
	// difference from it at the site, pooled across sites (SiteChoice);
	// nil Diff otherwise.
	Best         int       `json:",omitempty"`
	Diff, DiffSE []float64 `json:",omitempty"`
}

// Decide scores the candidates from their summed Pairs (Scores, the
// first candidate the reference) and forms their Ensemble (Combine) with
// the sites' Centres.
func Decide(pairs Pairs, centres []Centre, z float64) ([]Score, Ensemble, error) {
	sums, err := pairs.Sums(0)
	if err != nil {
		return nil, Ensemble{}, err
	}
	scores, err := Scores(sums, 0)
	if err != nil {
		return nil, Ensemble{}, err
	}
	ens, err := Combine(pairs, centres, z)
	return scores, ens, err
}

// Combine forms the Ensemble from the candidates' summed validation Pairs
// and each site's Centre: its members are the candidates whose mean paired
// loss difference from the best candidate is at most z of its standard
// errors, the candidates the validation rows cannot tell from the best,
// and each site's shift is Recentre's.
func Combine(pairs Pairs, centres []Centre, z float64) (Ensemble, error) {
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
		if a == e.Best || d.Diff/n <= z*noisySE(meanSE(d.Diff, d.DiffSq, n), d.DiffNoise, n) {
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
	for s, ce := range centres {
		if ce.N > 0 && (len(ce.CATE) != c || (ce.Res != nil && (len(ce.Res) != c || len(ce.ResSq) != c))) {
			return Ensemble{}, fmt.Errorf("%w: site %d: centring sums of %d candidates, want %d", ErrInput, s, len(ce.CATE), c)
		}
	}
	e.Sites, e.Spread, err = Recentre(centres, e.Members)
	return e, err
}

// Recentre returns the re-centring of the mean CATE of the candidates
// members at each site of centres, and the spread of the sites' gaps.
//
// A site's own gap g_s, the mean of ψ − τ̄ over its rows (τ̄ the members'
// mean CATE), has variance v_s, the squared standard error of its mean ψ.
// The sites' gaps are pooled as a random-effects meta-analysis pools
// studies (DerSimonian and Laird 1986): their between-site variance t² is
// the method-of-moments estimate from Cochran's Q with weights 1/v_s, and
// each site's gap is its best linear predictor, the pooled mean ḡ (weights
// 1/(v_s + t²)) plus t²/(t² + v_s) of the site's departure from it, with
// variance v_s·t²/(t² + v_s) plus the pooled mean's, shrunk by (v_s/(t² +
// v_s))². Alike sites (t² = 0) share the pooled gap; sites whose models
// miss by different amounts, as sites with different outcome surfaces do,
// each keep nearer their own. A site of fewer than two rows, or whose ψ
// do not vary, takes the pooled gap with variance var(ḡ) + t². Without
// any such site every shift is 0.
func Recentre(centres []Centre, members []int) ([]Centring, float64, error) {
	out := make([]Centring, len(centres))
	g, v := make([]float64, len(centres)), make([]float64, len(centres))
	for s, ce := range centres {
		if ce.N < 2 {
			continue
		}
		var tau, res, resSq float64
		for _, a := range members {
			if a < 0 || a >= len(ce.CATE) || (ce.Res != nil && a >= len(ce.Res)) {
				return nil, 0, fmt.Errorf("%w: site %d: centring sums of %d candidates, member %d", ErrInput, s, len(ce.CATE), a)
			}
			tau += ce.CATE[a]
			if ce.Res != nil {
				res, resSq = res+ce.Res[a], resSq+ce.ResSq[a]
			}
		}
		k := float64(len(members))
		if ce.Res != nil {
			g[s], v[s] = residualGap(res/k, resSq/k, ce.N, ce.ResVar/k)
		} else {
			se := meanSE(ce.Psi, ce.PsiSq, ce.N)
			g[s], v[s] = (ce.Psi-tau/k)/ce.N, se*se
		}
	}
	gap, gapVar, t2, ok := randomEffects(g, v)
	if !ok {
		return out, 0, nil
	}
	for s := range centres {
		out[s] = Centring{Gap: gap[s], GapSE: math.Sqrt(gapVar[s])}
		if g2 := gap[s] * gap[s]; g2 > 0 {
			out[s].Shift = gap[s] * math.Max(0, 1-gapVar[s]/g2)
		}
	}
	return out, math.Sqrt(t2), nil
}

// randomEffects pools the sites' estimates g, of variances v, as a
// random-effects meta-analysis pools studies (DerSimonian and Laird
// 1986), and returns each site's best linear predictor and its variance,
// and the between-site variance t²: the pooled mean (weights 1/(v + t²))
// plus t²/(t² + v_s) of the site's departure from it, with variance
// v_s·t²/(t² + v_s) plus the pooled mean's, shrunk by (v_s/(t² + v_s))².
// A site whose v is not positive has no estimate of its own and takes the
// pooled mean, with variance var(pooled) + t². ok is false when no site
// has one.
func randomEffects(g, v []float64) (est, variance []float64, t2 float64, ok bool) {
	var sw, sw2, swg float64
	m := 0
	for s := range g {
		if !(v[s] > 0) {
			continue
		}
		w := 1 / v[s]
		sw, sw2, swg = sw+w, sw2+w*w, swg+w*g[s]
		m++
	}
	if m == 0 {
		return nil, nil, 0, false
	}
	fixed := swg / sw
	var q float64
	for s := range g {
		if v[s] > 0 {
			q += (g[s] - fixed) * (g[s] - fixed) / v[s]
		}
	}
	if m > 1 {
		t2 = math.Max(0, (q-float64(m-1))/(sw-sw2/sw))
	}
	var sr, srg float64
	for s := range g {
		if v[s] > 0 {
			w := 1 / (v[s] + t2)
			sr, srg = sr+w, srg+w*g[s]
		}
	}
	pooled, pooledVar := srg/sr, 1/sr
	est, variance = make([]float64, len(g)), make([]float64, len(g))
	for s := range g {
		est[s], variance[s] = pooled, pooledVar+t2
		if v[s] > 0 {
			b := v[s] / (v[s] + t2) // the weight of the pooled mean
			est[s] = pooled + (1-b)*(g[s]-pooled)
			variance[s] = (1-b)*v[s] + b*b*pooledVar
		}
	}
	return est, variance, t2, true
}

// residualGap returns a private site's gap, the mean of ψ − τ̄ over its n
// rows, and its variance, from the members' mean sum of residuals r, the
// mean of their sums of squares r2 (no less than the sum of squares of
// the mean residual, so the variance errs large), and the variance
// noise of the noise on r.
func residualGap(r, r2, n, noise float64) (gap, variance float64) {
	gap = r / n
	sd := math.Sqrt(math.Max(0, (r2-n*gap*gap)/(n-1)) / n)
	se := noisySE(sd, noise, n)
	return gap, se * se
}

// Has reports whether candidate c is a member.
func (e Ensemble) Has(c int) bool {
	_, ok := slices.BinarySearch(e.Members, c)
	return ok
}
