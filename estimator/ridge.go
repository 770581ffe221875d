package estimator

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// RidgeStats are the sufficient statistics of a ridge regression of a
// target v on p features φ: n, Σφ, Σv, ΦᵀΦ and Φᵀv. They add over sites,
// so a federation solves the regression of the pooled rows from what each
// site sends, without sending a row. The DR-learner and T-learner
// candidates of model selection are fitted from them.
type RidgeStats struct {
	P         int
	N         float64
	FeatSum   []float64 // p: Σφ
	TargetSum float64   // Σv
	Gram      []float64 // p×p row-major: ΦᵀΦ
	Moment    []float64 // p: Φᵀv

	chunk RidgeChunk // AddRows' workspace, kept between calls
}

// NewRidgeStats returns empty statistics for p features.
func NewRidgeStats(p int) *RidgeStats {
	return &RidgeStats{P: p, FeatSum: make([]float64, p), Gram: make([]float64, p*p), Moment: make([]float64, p)}
}

// AddRows adds the rows of phi (n×p) with targets v; rows, when not nil,
// selects the rows to add. It is Set of a RidgeChunk, then AddChunk.
func (s *RidgeStats) AddRows(phi *mat.Dense, v []float64, rows []int) error {
	if err := s.chunk.Set(phi, v, rows); err != nil {
		return err
	}
	return s.AddChunk(&s.chunk)
}

// A RidgeChunk is one chunk of rows' contribution to RidgeStats: their
// Gram matrix, the costly part, computed apart from the statistics so that
// several chunks can be computed at once and then added in order
// (AddChunk), with the same result, bit for bit, as AddRows of each in
// turn. It keeps phi, v and rows until it is set again. The zero value is
// ready to use; a RidgeChunk is not safe for concurrent use.
type RidgeChunk struct {
	phi     *mat.Dense
	v       []float64
	rows    []int
	sub, ff []float64 // the selected rows, gathered; their Gram matrix
	g       gemm
}

// Set makes c the chunk of the rows of phi (n×p) with targets v; rows,
// when not nil, selects the rows. A refused chunk is empty.
func (c *RidgeChunk) Set(phi *mat.Dense, v []float64, rows []int) error {
	c.phi, c.v, c.rows = nil, nil, nil
	n, p := phi.Dims()
	if len(v) != n {
		return fmt.Errorf("estimator: ridge statistics: %d×%d features and %d targets", n, p, len(v))
	}
	m := n
	if rows != nil {
		m = len(rows)
	}
	for r := range m {
		i := r
		if rows != nil {
			i = rows[r]
		}
		if i < 0 || i >= n {
			return fmt.Errorf("estimator: ridge statistics: row %d of %d", i, n)
		}
		if math.IsNaN(v[i]) || math.IsInf(v[i], 0) {
			return fmt.Errorf("estimator: ridge statistics: target of row %d is %v", i, v[i])
		}
	}
	if m == 0 {
		return nil
	}
	// Every row, as they lie in phi; a selection, gathered first.
	sv := view(phi)
	if rows != nil {
		c.sub = grow(c.sub, m*p)
		for r, i := range rows {
			copy(c.sub[r*p:(r+1)*p], phi.RawRowView(i))
		}
		sv = strided{data: c.sub, rows: m, cols: p, rs: p, cs: 1}
	}
	// The package's gemm, not gonum's: for this Φᵀ·Φ of a few thousand
	// rows gonum's dgemm runs axpy kernels at a sixth of its speed. Only
	// the strips of columns on and above the diagonal are computed, and
	// the rest mirrored: entry (j, i) is the same sum as (i, j), its
	// products' factors swapped, which rounds alike.
	c.ff = grow(c.ff, p*p)
	ff := strided{data: c.ff, rows: p, cols: p, rs: p, cs: 1}
	at := sv.t()
	for j0 := 0; j0 < p; j0 += gemmCols {
		j1 := min(p, j0+gemmCols)
		lo := max(0, j1-gemmCols) // a last narrow strip overlaps the one before
		c.g.mul(ff.block(0, j1, lo, j1), at.block(0, j1, 0, m), sv.block(0, m, lo, j1))
	}
	for i := range p {
		for j := range i {
			c.ff[i*p+j] = c.ff[j*p+i]
		}
	}
	c.phi, c.v, c.rows = phi, v, rows
	return nil
}

// AddChunk adds the rows of c to s.
func (s *RidgeStats) AddChunk(c *RidgeChunk) error {
	if c.phi == nil {
		return nil
	}
	if _, p := c.phi.Dims(); p != s.P {
		return fmt.Errorf("estimator: ridge statistics of %d features: got %d", s.P, p)
	}
	m := len(c.v)
	if c.rows != nil {
		m = len(c.rows)
	}
	for r := range m {
		i := r
		if c.rows != nil {
			i = c.rows[r]
		}
		for j, f := range c.phi.RawRowView(i) {
			s.FeatSum[j] += f
			s.Moment[j] += f * c.v[i]
		}
		s.TargetSum += c.v[i]
	}
	s.N += float64(m)
	floats.Add(s.Gram, c.ff)
	return nil
}

// grow returns buf resliced to n elements, reallocated when too small.
func grow(buf []float64, n int) []float64 {
	if cap(buf) < n {
		return make([]float64, n)
	}
	return buf[:n]
}

// Add adds o to s.
func (s *RidgeStats) Add(o *RidgeStats) error {
	if o == nil || o.P != s.P || len(o.Gram) != s.P*s.P || len(o.FeatSum) != s.P || len(o.Moment) != s.P {
		return errors.New("estimator: ridge statistics of different shapes")
	}
	s.N += o.N
	s.TargetSum += o.TargetSum
	for j := range s.FeatSum {
		s.FeatSum[j] += o.FeatSum[j]
		s.Moment[j] += o.Moment[j]
	}
	for j := range s.Gram {
		s.Gram[j] += o.Gram[j]
	}
	return nil
}

// Ridge is a fitted ridge regression: v̂ = Intercept + φᵀBeta.
type Ridge struct {
	Intercept float64
	Beta      []float64
}

// Solve fits the ridge regression with penalty lambda on Beta and an
// unpenalised intercept: it solves (Φcᵀ Φc + λI)β = Φcᵀ(v − v̄) on the
// centred features Φc, from the sums alone.
func (s *RidgeStats) Solve(lambda float64) (Ridge, error) {
	if s.N < 1 {
		return Ridge{}, errors.New("estimator: ridge regression of no rows")
	}
	if !(lambda > 0) {
		return Ridge{}, fmt.Errorf("estimator: ridge penalty %v must be positive", lambda)
	}
	p := s.P
	mean := make([]float64, p)
	for j := range mean {
		mean[j] = s.FeatSum[j] / s.N
	}
	vbar := s.TargetSum / s.N
	a := mat.NewSymDense(p, nil)
	rhs := mat.NewVecDense(p, nil)
	for j := range p {
		for k := j; k < p; k++ {
			v := s.Gram[j*p+k] - s.N*mean[j]*mean[k]
			if j == k {
				v += lambda
			}
			a.SetSym(j, k, v)
		}
		rhs.SetVec(j, s.Moment[j]-s.N*mean[j]*vbar)
	}
	var chol mat.Cholesky
	if !chol.Factorize(a) {
		return Ridge{}, errors.New("estimator: ridge system is not positive definite")
	}
	var beta mat.VecDense
	if err := chol.SolveVecTo(&beta, rhs); err != nil {
		return Ridge{}, fmt.Errorf("estimator: ridge regression: %w", err)
	}
	r := Ridge{Beta: make([]float64, p), Intercept: vbar}
	for j := range p {
		r.Beta[j] = beta.AtVec(j)
		r.Intercept -= mean[j] * r.Beta[j]
	}
	return r, nil
}

// Predict returns the fitted values of the rows of phi.
func (r Ridge) Predict(phi *mat.Dense) []float64 {
	n, _ := phi.Dims()
	out := make([]float64, n)
	b := mat.NewVecDense(len(r.Beta), r.Beta)
	for i := range n {
		row := phi.RawRowView(i)
		out[i] = r.Intercept + mat.Dot(mat.NewVecDense(len(row), row), b)
	}
	return out
}
