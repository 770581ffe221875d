package pipeline

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/inference"
)

// TestHeterogeneity: the rows of crff_heterogeneity, crff_clan and
// crff_policy come from the held-out rows alone, the BLP finds the
// heterogeneity of τ = 2 + x, and too few held-out rows give none and a
// reason.
func TestHeterogeneity(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 1000
	x := mat.NewDense(n, 2, nil)
	psi, g0, cate := make([]float64, n), make([]float64, n), make([]float64, n)
	var held []int
	for i := range n {
		a := r.NormFloat64()
		x.Set(i, 0, a)
		x.Set(i, 1, r.NormFloat64())
		cate[i] = 2 + a + 0.3*r.NormFloat64()
		psi[i] = 2 + a + 2*r.NormFloat64()
		g0[i] = r.NormFloat64()
		if i%5 == 0 {
			held = append(held, i)
		} else {
			psi[i] = 1e6 // rows τ̂ was trained on must not enter
		}
	}
	in := HeterogeneityInput{Held: held, PSI: psi, Control: g0, CATE: cate, X: x, Columns: []string{"age", "noise"}, Thresholds: []float64{0, 2}}
	short := in
	short.Columns = short.Columns[:1]
	if _, _, err := Heterogeneity(short); err == nil || !strings.Contains(err.Error(), "1 covariate names for 2 covariates") {
		t.Errorf("one covariate name for two covariates: %v", err)
	}
	h, why, err := Heterogeneity(in)
	if err != nil || h == nil {
		t.Fatalf("%v (%s)", err, why)
	}
	stats := map[string]float64{}
	for _, s := range h.Stats {
		stats[s.Statistic] = s.Estimate.Estimate
		if s.Estimate.N > len(held) {
			t.Errorf("%s over %d rows, more than the %d held out", s.Statistic, s.Estimate.N, len(held))
		}
		if s.Statistic == "blp_het" && s.PValue > 0.01 {
			t.Errorf("blp_het p-value %v for τ = 2 + x", s.PValue)
		}
	}
	if len(stats) != 19 || stats["blp_ate"] > 3 || stats["gates_5"] < stats["gates_1"] {
		t.Errorf("statistics %v", stats)
	}
	if len(h.CLAN) != 2 || h.CLAN[0].Covariate != "age" || len(h.Policy) != 3 || h.Policy[2].Policy != "cate_above_2" {
		t.Errorf("CLAN %+v, policies %+v", h.CLAN, h.Policy)
	}
	// With a calibration, cate_lower_above_0 reads the calibrated
	// interval's lower bounds of the held-out rows, below their CATEs: it
	// treats fewer rows than cate_above_0.
	heldX := mat.NewDense(len(held), 2, nil)
	hp, hc := make([]float64, len(held)), make([]float64, len(held))
	for j, i := range held {
		heldX.SetRow(j, x.RawRowView(i))
		hp[j], hc[j] = psi[i], cate[i]
	}
	cal, err := inference.FitCalibration(hp, hc, heldX)
	if err != nil {
		t.Fatal(err)
	}
	in.Calibration = cal
	hc2, _, err := Heterogeneity(in)
	if err != nil {
		t.Fatal(err)
	}
	if lo, pt := hc2.Policy[0], hc2.Policy[1]; lo.Policy != "cate_lower_above_0" || !(lo.Treats < pt.Treats) || h.Policy[0].Treats != h.Policy[1].Treats {
		t.Errorf("with a calibration %s treats %v, %s %v; without, %v and %v", lo.Policy, lo.Treats, pt.Policy, pt.Treats, h.Policy[0].Treats, h.Policy[1].Treats)
	}
	in.Calibration = nil
	var b strings.Builder
	if err := WriteHeterogeneity(&b, h); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "heterogeneity on 200 held-out rows: BLP loading ") || !strings.Contains(b.String(), "AUTOC ") {
		t.Errorf("printed %q", b.String())
	}
	if b.Reset(); WriteHeterogeneity(&b, nil) != nil || b.Len() != 0 {
		t.Errorf("printed %q of no tests", b.String())
	}
	in.Held = held[:9]
	if h, why, err := Heterogeneity(in); h != nil || err != nil || !strings.Contains(why, "9 rows held out") {
		t.Errorf("9 held-out rows: %v, %q, %v", h, why, err)
	}
}

// BenchmarkHeterogeneity times the tests of a site of 100 000 rows with
// 30 covariates, 20 000 of them held out, against which a fit of that
// site (minutes) is to be compared.
func BenchmarkHeterogeneity(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	const n, d = 100000, 30
	x := mat.NewDense(n, d, nil)
	psi, g0, cate := make([]float64, n), make([]float64, n), make([]float64, n)
	var held []int
	for i := range n {
		for j := range d {
			x.Set(i, j, r.NormFloat64())
		}
		cate[i], psi[i], g0[i] = 2+x.At(i, 0), 2+x.At(i, 0)+r.NormFloat64(), r.NormFloat64()
		if i%5 == 0 {
			held = append(held, i)
		}
	}
	cols := make([]string, d)
	for j := range cols {
		cols[j] = fmt.Sprintf("x%d", j+1)
	}
	in := HeterogeneityInput{Held: held, PSI: psi, Control: g0, CATE: cate, X: x, Columns: cols, Thresholds: []float64{0}}
	b.ResetTimer()
	for range b.N {
		if _, _, err := Heterogeneity(in); err != nil {
			b.Fatal(err)
		}
	}
}
