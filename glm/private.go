package glm

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Private nuisance models from perturbed sufficient statistics.
//
// A site that releases its AIPW scores' sum with noise needs nuisance
// models whose fit does not move with any one row beyond a known amount,
// or else one row moves every other row's score. It fits them from one
// release of noised sums (sufficient-statistics perturbation): for each
// arm, the Gram matrix Σ u uᵀ of u = (1, v₁…v_d, t), with every covariate
// v and the target t mapped into [−1, 1] first. Adding or removing a row
// moves one arm's matrix by u uᵀ, of Frobenius norm ‖u‖² ≤ d + 2
// (Sensitivity). Everything after the noise is post-processing:
//
//   - the arms' counts, means and the pooled within-arm scatter of v;
//   - the principal directions of that scatter whose eigenvalues stand
//     clear of the noise's (about 2√(2d)·sd, the spectral norm of the two
//     arms' symmetric noise), so that noise spread over d² entries is
//     confined to k ≪ d directions when the covariates share a few
//     factors, as proxies of a latent confounder do;
//   - in those k directions, each arm's least squares regression of t
//     (the outcome means) and linear discriminant analysis (the
//     propensity, logistic in v), with a ridge only where noise leaves a
//     matrix short of positive definite.
//
// Where no direction stands clear of the noise, the models are the
// arms' means and the treated share.

// Stats holds the sufficient statistics of the private nuisance models:
// for each arm, the packed upper triangle, row by row, of Σ u uᵀ over the
// arm's rows, u = (1, v₁…v_D, t).
type Stats struct {
	D    int
	Arms [2][]float64
}

// packedLen is the length of the packed upper triangle of an m×m matrix.
func packedLen(m int) int { return m * (m + 1) / 2 }

// Sensitivity returns the L2 norm by which adding or removing one row
// moves Stats.Vector of d covariates: ‖u uᵀ‖_F = ‖u‖² ≤ d + 2, since
// every entry of u lies in [−1, 1] and one arm's matrix alone changes.
func Sensitivity(d int) float64 { return float64(d + 2) }

// Accumulate returns the Stats of the rows of v (n×d, every entry in
// [−1, 1]) in arms w (each 0 or 1) with targets t (each in [−1, 1]). An
// entry out of range is an error: the sensitivity holds only within it.
func Accumulate(v mat.Matrix, w, t []float64) (Stats, error) {
	n, d := v.Dims()
	if len(w) != n || len(t) != n {
		return Stats{}, fmt.Errorf("%w: %d rows of covariates, %d arms, %d targets", ErrShape, n, len(w), len(t))
	}
	m := d + 2
	s := Stats{D: d, Arms: [2][]float64{make([]float64, packedLen(m)), make([]float64, packedLen(m))}}
	u := make([]float64, m)
	u[0] = 1
	for i := range n {
		if w[i] != 0 && w[i] != 1 {
			return Stats{}, fmt.Errorf("glm: row %d: arm %v is not 0 or 1", i, w[i])
		}
		for j := range d {
			u[1+j] = v.At(i, j)
		}
		u[m-1] = t[i]
		for j, x := range u[1:] {
			if !(math.Abs(x) <= 1) {
				if j == d {
					return Stats{}, fmt.Errorf("glm: row %d: target %v is outside [-1, 1]", i, x)
				}
				return Stats{}, fmt.Errorf("glm: row %d: covariate %d is %v, outside [-1, 1]", i, j, x)
			}
		}
		g := s.Arms[int(w[i])]
		k := 0
		for a := range m {
			ua := u[a]
			for b := a; b < m; b++ {
				g[k] += ua * u[b]
				k++
			}
		}
	}
	return s, nil
}

// Vector returns the two arms' triangles, control then treated, as one
// vector: what a site releases with noise.
func (s Stats) Vector() []float64 {
	return append(append([]float64(nil), s.Arms[0]...), s.Arms[1]...)
}

// StatsFromVector reads back a Stats of d covariates from its Vector.
func StatsFromVector(d int, v []float64) (Stats, error) {
	if d < 0 {
		return Stats{}, fmt.Errorf("%w: %d covariates", ErrShape, d)
	}
	p := packedLen(d + 2)
	if len(v) != 2*p {
		return Stats{}, fmt.Errorf("%w: %d sums for %d covariates, want %d", ErrShape, len(v), d, 2*p)
	}
	return Stats{D: d, Arms: [2][]float64{append([]float64(nil), v[:p]...), append([]float64(nil), v[p:]...)}}, nil
}

// unpack returns arm a's full symmetric matrix.
func (s Stats) unpack(a int) *mat.SymDense {
	m := s.D + 2
	g := mat.NewSymDense(m, nil)
	k := 0
	for i := range m {
		for j := i; j < m; j++ {
			g.SetSym(i, j, s.Arms[a][k])
			k++
		}
	}
	return g
}

// Private is a site's nuisance models fitted by FitPrivate. Its
// predictions are in the units of Accumulate's inputs: covariates and
// targets in [−1, 1].
type Private struct {
	// Basis holds the k principal directions kept, as columns (d×k; nil
	// when none stood clear of the noise).
	Basis *mat.Dense
	Mean  [2][]float64 // each arm's covariate means (d)
	YMean [2]float64   // each arm's mean target
	Beta  [2][]float64 // each arm's coefficients on Basisᵀ(v − Mean[arm]) (k)
	// Logit is the propensity's log odds at the midpoint of the arms'
	// means, and LDA its coefficients on Basisᵀ(v − midpoint) (k).
	Logit float64
	LDA   []float64
}

// minArm is the smallest count FitPrivate gives an arm: noise can leave a
// count near zero or negative.
const minArm = 1

// FitPrivate fits the nuisance models from Stats s whose every entry
// carries independent noise of standard deviation sd (0: exact sums).
func FitPrivate(s Stats, sd float64) (*Private, error) {
	d := s.D
	if d < 0 || len(s.Arms[0]) != packedLen(d+2) || len(s.Arms[1]) != packedLen(d+2) {
		return nil, fmt.Errorf("%w: sums of %d and %d entries for %d covariates", ErrShape, len(s.Arms[0]), len(s.Arms[1]), d)
	}
	if math.IsNaN(sd) || sd < 0 || math.IsInf(sd, 0) {
		return nil, fmt.Errorf("glm: noise sd %v", sd)
	}
	for a := range 2 {
		for _, x := range s.Arms[a] {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, errors.New("glm: the sufficient statistics are not finite")
			}
		}
	}
	p := &Private{}
	var count [2]float64
	scatter := mat.NewSymDense(max(d, 1), nil)
	cross := [2]*mat.VecDense{}
	armScatter := [2]*mat.SymDense{}
	for a := range 2 {
		g := s.unpack(a)
		n := math.Max(g.At(0, 0), minArm)
		count[a] = n
		mean := make([]float64, d)
		for j := range mean {
			mean[j] = clamp(g.At(0, 1+j)/n, 1)
		}
		ym := clamp(g.At(0, d+1)/n, 1)
		p.Mean[a], p.YMean[a] = mean, ym
		// The arm's scatter about its own means, and the cross products
		// of the centred covariates with the centred target.
		sc := mat.NewSymDense(max(d, 1), nil)
		cr := mat.NewVecDense(max(d, 1), nil)
		for i := range d {
			for j := i; j < d; j++ {
				sc.SetSym(i, j, g.At(1+i, 1+j)-n*mean[i]*mean[j])
			}
			cr.SetVec(i, g.At(1+i, d+1)-n*mean[i]*ym)
		}
		armScatter[a], cross[a] = sc, cr
		scatter.AddSym(scatter, sc)
	}
	p.Logit = math.Log(count[1] / count[0])
	if d == 0 {
		return p, nil
	}
	basis, err := principal(scatter, 3*math.Sqrt(2*float64(d))*sd)
	if err != nil || basis == nil {
		return p, err
	}
	p.Basis = basis
	// No ridge beyond what positive definiteness needs: the directions
	// kept stand clear of the noise, and a ridge of the noise's size
	// shrank the coefficients by a fifth on sites of 10 000 rows, which
	// biased the AIPW by four standard errors.
	for a := range 2 {
		proj := projected(basis, armScatter[a])
		var rhs mat.VecDense
		rhs.MulVec(basis.T(), cross[a])
		beta, err := ridgeSolve(proj, &rhs, 0)
		if err != nil {
			return nil, err
		}
		p.Beta[a] = beta
	}
	// LDA: the pooled within-arm covariance in the basis, and the
	// difference of the arms' means.
	pooled := projected(basis, scatter)
	dof := math.Max(count[0]+count[1]-2, 1)
	pooled.ScaleSym(1/dof, pooled)
	diff := make([]float64, d)
	for j := range diff {
		diff[j] = p.Mean[1][j] - p.Mean[0][j]
	}
	var delta mat.VecDense
	delta.MulVec(basis.T(), mat.NewVecDense(d, diff))
	if p.LDA, err = ridgeSolve(pooled, &delta, 0); err != nil {
		return nil, err
	}
	return p, nil
}

// projected returns bᵀ s b, symmetrised against rounding.
func projected(b *mat.Dense, s *mat.SymDense) *mat.SymDense {
	var t mat.Dense
	t.Product(b.T(), s, b)
	k, _ := t.Dims()
	out := mat.NewSymDense(k, nil)
	for i := range k {
		for j := i; j < k; j++ {
			out.SetSym(i, j, (t.At(i, j)+t.At(j, i))/2)
		}
	}
	return out
}

// principal returns, as columns, the eigenvectors of the symmetric s whose
// eigenvalues exceed floor (and a relative 1e-9 of the largest), largest
// first; nil when none does.
func principal(s *mat.SymDense, floor float64) (*mat.Dense, error) {
	var es mat.EigenSym
	if !es.Factorize(s, true) {
		return nil, errors.New("glm: the covariates' scatter has no eigendecomposition")
	}
	vals := es.Values(nil)
	var vecs mat.Dense
	es.VectorsTo(&vecs)
	top := vals[len(vals)-1]
	var keep []int
	for i := len(vals) - 1; i >= 0; i-- {
		if vals[i] > floor && vals[i] > 1e-9*top {
			keep = append(keep, i)
		}
	}
	if len(keep) == 0 {
		return nil, nil
	}
	d, _ := vecs.Dims()
	b := mat.NewDense(d, len(keep), nil)
	for c, i := range keep {
		for r := range d {
			b.Set(r, c, vecs.At(r, i))
		}
	}
	return b, nil
}

// ridgeSolve returns (a + λI)⁻¹ b for the smallest λ ≥ ridge (at least a
// relative 1e-12 of a's diagonal), doubling, at which a + λI is positive
// definite: noise can leave a indefinite.
func ridgeSolve(a *mat.SymDense, b *mat.VecDense, ridge float64) ([]float64, error) {
	k := a.SymmetricDim()
	scale := 0.0
	for i := range k {
		scale = math.Max(scale, math.Abs(a.At(i, i)))
	}
	lambda := math.Max(ridge, 1e-12*scale)
	for range 200 {
		m := mat.NewSymDense(k, nil)
		m.CopySym(a)
		for i := range k {
			m.SetSym(i, i, m.At(i, i)+lambda)
		}
		var chol mat.Cholesky
		if chol.Factorize(m) {
			var x mat.VecDense
			if err := chol.SolveVecTo(&x, b); err == nil {
				return append([]float64(nil), x.RawVector().Data...), nil
			}
		}
		lambda = 2*lambda + 1e-12
	}
	return nil, errors.New("glm: the noised normal equations stay singular")
}

// clamp returns x clamped to [−r, r].
func clamp(x, r float64) float64 { return math.Max(-r, math.Min(r, x)) }

// Predict returns, for each row of v (n×d, on Accumulate's scale), the
// propensity and each arm's mean target, clamped to [−1, 1].
func (p *Private) Predict(v mat.Matrix) (e, mu0, mu1 []float64, err error) {
	n, d := v.Dims()
	if len(p.Mean[0]) != d || len(p.Mean[1]) != d {
		return nil, nil, nil, fmt.Errorf("%w: %d covariates, the model has %d", ErrShape, d, len(p.Mean[0]))
	}
	k := 0
	if p.Basis != nil {
		var bd int
		bd, k = p.Basis.Dims()
		if bd != d || len(p.Beta[0]) != k || len(p.Beta[1]) != k || len(p.LDA) != k {
			return nil, nil, nil, fmt.Errorf("%w: a private model's basis does not match its coefficients", ErrShape)
		}
	}
	e, mu0, mu1 = make([]float64, n), make([]float64, n), make([]float64, n)
	z := make([]float64, k)
	for i := range n {
		// z for each centring: the arm means for the outcome models,
		// their midpoint for the discriminant.
		proj := func(centre func(j int) float64) {
			for c := range k {
				s := 0.0
				for j := range d {
					s += p.Basis.At(j, c) * (v.At(i, j) - centre(j))
				}
				z[c] = s
			}
		}
		mus := [2]float64{}
		for a := range 2 {
			proj(func(j int) float64 { return p.Mean[a][j] })
			mu := p.YMean[a]
			for c := range k {
				mu += p.Beta[a][c] * z[c]
			}
			mus[a] = clamp(mu, 1)
		}
		proj(func(j int) float64 { return (p.Mean[0][j] + p.Mean[1][j]) / 2 })
		eta := p.Logit
		for c := range k {
			eta += p.LDA[c] * z[c]
		}
		e[i], mu0[i], mu1[i] = 1/(1+math.Exp(-eta)), mus[0], mus[1]
	}
	return e, mu0, mu1, nil
}
