package estimator

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestRidgeStatsMatchesDirect fits a ridge regression from two sites'
// sums and compares it with the normal equations of the pooled, centred
// rows.
func TestRidgeStatsMatchesDirect(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n, p, lambda = 60, 5, 2.5
	phi := mat.NewDense(n, p, nil)
	v := make([]float64, n)
	for i := range n {
		for j := range p {
			phi.Set(i, j, rng.NormFloat64()+float64(j))
		}
		v[i] = 3 + phi.At(i, 0) - 2*phi.At(i, 3) + 0.1*rng.NormFloat64()
	}
	a, b := NewRidgeStats(p), NewRidgeStats(p)
	var lo, hi []int
	for i := range n {
		if i%3 == 0 {
			lo = append(lo, i)
		} else {
			hi = append(hi, i)
		}
	}
	if err := a.AddRows(phi, v, lo); err != nil {
		t.Fatal(err)
	}
	if err := b.AddRows(phi, v, hi); err != nil {
		t.Fatal(err)
	}
	if err := a.Add(b); err != nil {
		t.Fatal(err)
	}
	// Every row at once (rows nil), from a view into a wider matrix: the
	// same statistics as the two selections added.
	wide := mat.NewDense(n, p+3, nil)
	wide.Slice(0, n, 1, p+1).(*mat.Dense).Copy(phi)
	all := NewRidgeStats(p)
	if err := all.AddRows(wide.Slice(0, n, 1, p+1).(*mat.Dense), v, nil); err != nil {
		t.Fatal(err)
	}
	if all.N != a.N || relErr(all.Gram, a.Gram, 1e-12) > 1e-12 || relErr(all.Moment, a.Moment, 1e-12) > 1e-12 || relErr(all.FeatSum, a.FeatSum, 1e-12) > 1e-12 {
		t.Errorf("every row at once: n %v, Gram %v; the two selections: n %v, Gram %v", all.N, all.Gram, a.N, a.Gram)
	}
	got, err := a.Solve(lambda)
	if err != nil {
		t.Fatal(err)
	}

	// Direct: centre, then (ΦcᵀΦc + λI)β = Φcᵀ(v − v̄).
	mean := make([]float64, p)
	var vbar float64
	for i := range n {
		for j := range p {
			mean[j] += phi.At(i, j) / n
		}
		vbar += v[i] / n
	}
	c := mat.NewDense(n, p, nil)
	vc := mat.NewVecDense(n, nil)
	for i := range n {
		for j := range p {
			c.Set(i, j, phi.At(i, j)-mean[j])
		}
		vc.SetVec(i, v[i]-vbar)
	}
	var g mat.Dense
	g.Mul(c.T(), c)
	for j := range p {
		g.Set(j, j, g.At(j, j)+lambda)
	}
	var rhs, beta mat.VecDense
	rhs.MulVec(c.T(), vc)
	if err := beta.SolveVec(&g, &rhs); err != nil {
		t.Fatal(err)
	}
	for j := range p {
		if math.Abs(got.Beta[j]-beta.AtVec(j)) > 1e-9 {
			t.Errorf("beta[%d] = %v, want %v", j, got.Beta[j], beta.AtVec(j))
		}
	}
	pred := got.Predict(phi)
	for i := range n {
		want := vbar + mat.Dot(c.RowView(i), &beta)
		if math.Abs(pred[i]-want) > 1e-9 {
			t.Fatalf("row %d: predicted %v, want %v", i, pred[i], want)
		}
	}
}

func TestRidgeStatsErrors(t *testing.T) {
	s := NewRidgeStats(2)
	if _, err := s.Solve(1); err == nil {
		t.Error("solved a regression of no rows")
	}
	phi := mat.NewDense(2, 2, []float64{1, 2, 3, 4})
	if err := s.AddRows(phi, []float64{1}, nil); err == nil {
		t.Error("took 2 rows with 1 target")
	}
	if err := s.AddRows(phi, []float64{1, math.NaN()}, nil); err == nil {
		t.Error("took a NaN target")
	}
	if err := s.AddRows(phi, []float64{1, 2}, []int{0, 5}); err == nil {
		t.Error("took row 5 of 2")
	}
	// A refused call added nothing, not even its valid rows.
	if s.N != 0 || s.TargetSum != 0 || s.FeatSum[0] != 0 || s.Moment[0] != 0 || s.Gram[0] != 0 {
		t.Errorf("refused rows left statistics behind: %+v", s)
	}
	if err := s.Add(NewRidgeStats(3)); err == nil {
		t.Error("added statistics of 3 features to 2")
	}
	if err := s.AddRows(phi, []float64{1, 2}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Solve(0); err == nil {
		t.Error("solved with penalty 0")
	}
}

// BenchmarkRidgeStatsAddRows measures adding one chunk of FeatureChunk
// rows of the default outcome features (2D + 30 = 430 columns) to ridge
// statistics, the cost of model selection's statistics per chunk of a
// site's rows.
func BenchmarkRidgeStatsAddRows(b *testing.B) {
	const p = 430
	rng := rand.New(rand.NewPCG(1, 2))
	phi := mat.NewDense(FeatureChunk, p, nil)
	v := make([]float64, FeatureChunk)
	for i := range FeatureChunk {
		v[i] = rng.NormFloat64()
		for j := range p {
			phi.Set(i, j, rng.NormFloat64())
		}
	}
	s := NewRidgeStats(p)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.AddRows(phi, v, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRidgeGramTriangle checks that the Gram matrix computed on and above
// the diagonal and mirrored is, bit for bit, the full product ΦᵀΦ, for
// widths that are and are not a multiple of the kernel's strip, and that
// chunks set apart and added in order give AddRows' statistics.
func TestRidgeGramTriangle(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, p := range []int{3, 8, 13, 430} {
		const n = 37
		phi := mat.NewDense(n, p, nil)
		v := make([]float64, n)
		for i := range n {
			v[i] = rng.NormFloat64()
			for j := range p {
				phi.Set(i, j, rng.NormFloat64())
			}
		}
		var g gemm
		full := make([]float64, p*p)
		g.mul(strided{data: full, rows: p, cols: p, rs: p, cs: 1}, view(phi).t(), view(phi))
		s := NewRidgeStats(p)
		if err := s.AddRows(phi, v, nil); err != nil {
			t.Fatal(err)
		}
		for k := range full {
			if math.Float64bits(full[k]) != math.Float64bits(s.Gram[k]) {
				t.Fatalf("p=%d: Gram[%d,%d] = %v, full product %v", p, k/p, k%p, s.Gram[k], full[k])
			}
		}
		// Two chunks computed apart, added in order, against AddRows of
		// each in turn.
		rows := []int{1, 4, 9, 36}
		seq := NewRidgeStats(p)
		if err := seq.AddRows(phi, v, rows); err != nil {
			t.Fatal(err)
		}
		if err := seq.AddRows(phi, v, nil); err != nil {
			t.Fatal(err)
		}
		var a, b RidgeChunk
		if err := a.Set(phi, v, rows); err != nil {
			t.Fatal(err)
		}
		if err := b.Set(phi, v, nil); err != nil {
			t.Fatal(err)
		}
		apart := NewRidgeStats(p)
		if err := apart.AddChunk(&a); err != nil {
			t.Fatal(err)
		}
		if err := apart.AddChunk(&b); err != nil {
			t.Fatal(err)
		}
		if !sameBits(seq.Gram, apart.Gram) || !sameBits(seq.Moment, apart.Moment) || !sameBits(seq.FeatSum, apart.FeatSum) ||
			seq.N != apart.N || seq.TargetSum != apart.TargetSum {
			t.Errorf("p=%d: chunks added in order differ from AddRows in turn", p)
		}
	}
}

func sameBits(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}
