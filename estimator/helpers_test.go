package estimator

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// toyData returns n rows of a small confounded design with the covariate
// types of schema: both arms present, outcome continuous or binary.
func toyData(rng *rand.Rand, n int, schema Schema, shift float64) *Data {
	dx := len(schema.Binary)
	d := &Data{X: mat.NewDense(n, dx, nil), W: make([]float64, n), Y: make([]float64, n)}
	for i := range n {
		z := rng.NormFloat64() + shift
		row := d.X.RawRowView(i)
		for j := range dx {
			v := z*0.8 + rng.NormFloat64()*0.6
			if schema.Binary[j] {
				if v > 0 {
					row[j] = 1
				} else {
					row[j] = 0
				}
			} else {
				row[j] = 2 + 3*v
			}
		}
		d.W[i] = float64(i % 2)
		if rng.Float64() < 0.2 {
			d.W[i] = 1 - d.W[i]
		}
		mu := 1 + z + d.W[i]*(2+0.5*z)
		if schema.BinaryOutcome {
			if rng.Float64() < sigmoid(mu-2) {
				d.Y[i] = 1
			}
		} else {
			d.Y[i] = mu + 0.5*rng.NormFloat64()
		}
	}
	return d
}

// toyFederation builds a setup and sites for m toy sites.
func toyFederation(t testing.TB, m, n int, schema Schema, cfg Config) (*Setup, []*Site, []*Data) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]*Data, m)
	moments := make([]Moments, m)
	for s := range m {
		data[s] = toyData(rng, n, schema, 0.3*float64(s))
		moments[s] = data[s].Moments()
	}
	scaler, err := NewScaler(schema, moments)
	if err != nil {
		t.Fatal(err)
	}
	setup, err := NewSetup(context.Background(), schema, GaussianSpectral{}, cfg, scaler)
	if err != nil {
		t.Fatal(err)
	}
	sites := make([]*Site, m)
	for s := range m {
		if sites[s], err = NewSite(s, data[s], setup); err != nil {
			t.Fatal(err)
		}
	}
	return setup, sites, data
}

// relErr is ‖a−b‖ / max(‖a‖, ‖b‖, floor).
func relErr(a, b []float64, floor float64) float64 {
	var num, na, nb float64
	for i := range a {
		d := a[i] - b[i]
		num += d * d
		na += a[i] * a[i]
		nb += b[i] * b[i]
	}
	return math.Sqrt(num) / math.Max(math.Max(math.Sqrt(na), math.Sqrt(nb)), floor)
}

// centralDiff returns the central finite-difference gradient of f at x,
// with step h·max(1, |x_i|).
func centralDiff(f func() float64, x []float64, h float64) []float64 {
	g := make([]float64, len(x))
	for i := range x {
		old := x[i]
		step := h * math.Max(1, math.Abs(old))
		x[i] = old + step
		fp := f()
		x[i] = old - step
		fm := f()
		x[i] = old
		g[i] = (fp - fm) / (2 * step)
	}
	return g
}
