package glm

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// factorRows draws n rows of d covariates in [−1, 1] that share one
// latent factor z, an arm whose log odds is 1.5z and a target
// 0.3 + 0.4z + 0.2w + noise, clamped to [−1, 1].
func factorRows(n, d int, seed uint64) (v *mat.Dense, w, t, e []float64) {
	r := rand.New(rand.NewPCG(seed, 1))
	v = mat.NewDense(n, d, nil)
	w, t, e = make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range n {
		z := r.NormFloat64()
		for j := range d {
			v.Set(i, j, clamp(0.3*z+0.15*r.NormFloat64(), 1))
		}
		e[i] = 1 / (1 + math.Exp(-1.5*z))
		if r.Float64() < e[i] {
			w[i] = 1
		}
		t[i] = clamp(0.3*0.4*z+0.4*0.5*z+0.2*w[i]+0.1*r.NormFloat64(), 1)
	}
	return v, w, t, e
}

func TestPrivateSensitivityOnNeighbours(t *testing.T) {
	v, w, y, _ := factorRows(60, 5, 1)
	full, err := Accumulate(v, w, y)
	if err != nil {
		t.Fatal(err)
	}
	bound := Sensitivity(5)
	for i := range 60 {
		// D without row i.
		rest := mat.NewDense(59, 5, nil)
		var wr, yr []float64
		k := 0
		for r := range 60 {
			if r == i {
				continue
			}
			rest.SetRow(k, v.RawRowView(r))
			wr, yr = append(wr, w[r]), append(yr, y[r])
			k++
		}
		less, err := Accumulate(rest, wr, yr)
		if err != nil {
			t.Fatal(err)
		}
		diff := full.Vector()
		floats.Sub(diff, less.Vector())
		if got := floats.Norm(diff, 2); got > bound*(1+1e-12) {
			t.Fatalf("removing row %d moved the sums by %v, past the sensitivity %v", i, got, bound)
		}
	}
	// A row of extreme values attains the bound's order: its packed
	// triangle has norm between ‖u‖²/√2 and ‖u‖².
	one := mat.NewDense(1, 5, []float64{1, -1, 1, -1, 1})
	s, err := Accumulate(one, []float64{1}, []float64{-1})
	if err != nil {
		t.Fatal(err)
	}
	if got := floats.Norm(s.Vector(), 2); got > bound || got < bound/math.Sqrt2 {
		t.Errorf("an extreme row's sums have norm %v, want within [%v, %v]", got, bound/math.Sqrt2, bound)
	}
}

func TestAccumulateRefusesOutOfRange(t *testing.T) {
	v := mat.NewDense(2, 2, []float64{0.5, 0.5, 0.5, 1.5})
	if _, err := Accumulate(v, []float64{0, 1}, []float64{0, 0}); err == nil {
		t.Error("a covariate of 1.5 was accepted: it would break the sensitivity")
	}
	v.Set(1, 1, 0.5)
	if _, err := Accumulate(v, []float64{0, 1}, []float64{0, -2}); err == nil {
		t.Error("a target of -2 was accepted")
	}
	if _, err := Accumulate(v, []float64{0, 2}, []float64{0, 0}); err == nil {
		t.Error("an arm of 2 was accepted")
	}
	if _, err := Accumulate(v, []float64{0}, []float64{0, 0}); err == nil {
		t.Error("one arm for two rows was accepted")
	}
	if _, err := StatsFromVector(2, make([]float64, 3)); err == nil {
		t.Error("a vector of the wrong length was read")
	}
}

// TestPrivateExactMatchesLeastSquares: from exact sums every direction is
// kept, and each arm's outcome model is its least squares fit.
func TestPrivateExactMatchesLeastSquares(t *testing.T) {
	v, w, y, _ := factorRows(400, 4, 2)
	s, err := Accumulate(v, w, y)
	if err != nil {
		t.Fatal(err)
	}
	p, err := FitPrivate(s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, k := p.Basis.Dims(); k != 4 {
		t.Fatalf("kept %d directions from exact sums, want 4", k)
	}
	_, mu0, mu1, err := p.Predict(v)
	if err != nil {
		t.Fatal(err)
	}
	for a, mu := range [][]float64{mu0, mu1} {
		var rows []int
		for i, x := range w {
			if int(x) == a {
				rows = append(rows, i)
			}
		}
		xa := mat.NewDense(len(rows), 4, nil)
		ya := make([]float64, len(rows))
		for k, i := range rows {
			xa.SetRow(k, v.RawRowView(i))
			ya[k] = y[i]
		}
		ls, err := FitLinear(xa, ya, 0)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ls.Predict(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if math.Abs(clamp(want[i], 1)-mu[i]) > 1e-6 {
				t.Fatalf("arm %d row %d: %v, least squares %v", a, i, mu[i], want[i])
			}
		}
	}
}

// TestPrivateNoisyRecoversPropensity: with noise of the size a private
// site adds, the few directions kept carry the latent factor, and the
// propensity beats the treated share in log loss; with noise far past
// the signal no direction is kept and the models are the arms' means.
func TestPrivateNoisyRecoversPropensity(t *testing.T) {
	const n, d = 1500, 20
	v, w, y, e := factorRows(n, d, 3)
	s, err := Accumulate(v, w, y)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(4, 4))
	for _, tc := range []struct {
		sd      float64
		kept    bool
		maxLoss float64 // of the true propensity's log loss, as a ratio to the share's
	}{
		{sd: 30, kept: true, maxLoss: 0.25},
		{sd: 1e5, kept: false},
	} {
		vec := s.Vector()
		for i := range vec {
			vec[i] += tc.sd * r.NormFloat64()
		}
		noised, err := StatsFromVector(d, vec)
		if err != nil {
			t.Fatal(err)
		}
		p, err := FitPrivate(noised, tc.sd)
		if err != nil {
			t.Fatal(err)
		}
		if (p.Basis != nil) != tc.kept {
			t.Fatalf("sd %v: kept a basis %v, want %v", tc.sd, p.Basis != nil, tc.kept)
		}
		ph, mu0, mu1, err := p.Predict(v)
		if err != nil {
			t.Fatal(err)
		}
		if !tc.kept {
			if ph[0] != ph[n-1] || mu0[0] != mu0[n-1] || mu1[0] != mu1[n-1] {
				t.Errorf("sd %v: with no basis the models vary by row", tc.sd)
			}
			continue
		}
		share := floats.Sum(w) / n
		var loss, base, truth float64
		for i := range n {
			loss += logLoss(w[i], ph[i])
			base += logLoss(w[i], share)
			truth += logLoss(w[i], e[i])
		}
		t.Logf("sd %v: kept %d, gap ratio %.3f", tc.sd, p.Basis.RawMatrix().Cols, (loss-truth)/(base-truth))
		if (loss-truth)/(base-truth) > tc.maxLoss {
			t.Errorf("sd %v: log loss %.1f, treated share's %.1f, truth's %.1f: closes only %.0f%% of the gap", tc.sd, loss, base, truth, 100*(1-(loss-truth)/(base-truth)))
		}
	}
}

func logLoss(w, p float64) float64 {
	p = math.Min(math.Max(p, 1e-6), 1-1e-6)
	return -(w*math.Log(p) + (1-w)*math.Log(1-p))
}

func TestFitPrivateRefusesDamagedStats(t *testing.T) {
	v, w, y, _ := factorRows(20, 2, 5)
	s, err := Accumulate(v, w, y)
	if err != nil {
		t.Fatal(err)
	}
	s.Arms[1][3] = math.NaN()
	if _, err := FitPrivate(s, 1); err == nil {
		t.Error("NaN sums were fitted")
	}
	s.Arms[1] = s.Arms[1][:2]
	if _, err := FitPrivate(s, 1); err == nil {
		t.Error("short sums were fitted")
	}
	if _, err := FitPrivate(Stats{D: 2, Arms: [2][]float64{make([]float64, 10), make([]float64, 10)}}, -1); err == nil {
		t.Error("a negative noise sd was accepted")
	}
}
