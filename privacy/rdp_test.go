package privacy

import (
	"errors"
	"math"
	"testing"
)

// TestGaussianRDPClosedForm: at q = 1 the subsampled mechanism is the
// Gaussian mechanism, α/(2σ²), at integer and fractional orders, and
// TensorFlow Privacy's compute_rdp(1, 10, 1, 20) = 0.1.
func TestGaussianRDPClosedForm(t *testing.T) {
	for _, c := range []struct{ sigma, alpha float64 }{{10, 20}, {1, 2}, {2.5, 1.5}, {0.7, 32.5}, {40, 256}} {
		want := c.alpha / (2 * c.sigma * c.sigma)
		if got := GaussianRDP(c.sigma, c.alpha); math.Abs(got-want) > 1e-15*want {
			t.Errorf("GaussianRDP(%v, %v) = %v, want %v", c.sigma, c.alpha, got, want)
		}
		got, err := SubsampledGaussianRDP(1, c.sigma, c.alpha)
		if err != nil || got != want {
			t.Errorf("SubsampledGaussianRDP(1, %v, %v) = %v, %v; want %v", c.sigma, c.alpha, got, err, want)
		}
	}
	if got, _ := SubsampledGaussianRDP(1, 10, 20); math.Abs(got-0.1) > 1e-15 {
		t.Errorf("TF-privacy compute_rdp(1, 10, 1, 20) = 0.1; got %v", got)
	}
	if got, _ := SubsampledGaussianRDP(0, 10, 20); got != 0 {
		t.Errorf("q = 0: %v, want 0", got)
	}
}

// TestSubsampledGaussianRDPLiterature reproduces the values of TensorFlow
// Privacy's rdp_accountant_test.py (tensorflow/privacy,
// tensorflow_privacy/privacy/analysis/rdp_accountant_test.py):
// compute_rdp(q=0.1, noise_multiplier=2, steps=10, orders=5) = 0.07737,
// and compute_rdp(0.01, 2.5, 50, [1.5, 2.5, 5, 50, 100]) =
// [0.00065, 0.001085, 0.00218075, 0.023846, 167.416307], within 1%.
func TestSubsampledGaussianRDPLiterature(t *testing.T) {
	for _, c := range []struct {
		q, sigma float64
		steps    int
		alpha    float64
		want     float64
	}{
		{0.1, 2, 10, 5, 0.07737},
		{0.01, 2.5, 50, 1.5, 0.00065},
		{0.01, 2.5, 50, 2.5, 0.001085},
		{0.01, 2.5, 50, 5, 0.00218075},
		{0.01, 2.5, 50, 50, 0.023846},
		{0.01, 2.5, 50, 100, 167.416307},
	} {
		r, err := SubsampledGaussianRDP(c.q, c.sigma, c.alpha)
		if err != nil {
			t.Fatal(err)
		}
		got := float64(c.steps) * r
		if math.Abs(got-c.want) > 0.01*c.want {
			t.Errorf("q %v σ %v, %d steps, α %v: RDP %.6g, want %.6g (%.2f%% off)", c.q, c.sigma, c.steps, c.alpha, got, c.want, 100*math.Abs(got/c.want-1))
		}
	}
}

// TestEpsilonMonotone: ε falls as σ grows and rises with steps and q.
func TestEpsilonMonotone(t *testing.T) {
	eps := func(q, sigma float64, steps int) float64 {
		var a Accountant
		if err := a.Add(q, sigma, steps); err != nil {
			t.Fatal(err)
		}
		e, _, err := a.Epsilon(1e-5)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	base := eps(0.01, 1.1, 1000)
	for _, c := range []struct {
		name string
		e    float64
		more bool
	}{
		{"more noise", eps(0.01, 1.5, 1000), false}, {"more steps", eps(0.01, 1.1, 2000), true}, {"larger sample", eps(0.02, 1.1, 1000), true},
	} {
		if (c.e > base) != c.more || c.e == base {
			t.Errorf("%s: ε %v against %v", c.name, c.e, base)
		}
	}
	// Two runs composed spend what one run of both runs' steps does.
	var a Accountant
	if err := a.Add(1, 30, 100); err != nil {
		t.Fatal(err)
	}
	if err := a.Add(1, 30, 200); err != nil {
		t.Fatal(err)
	}
	got, _, _ := a.Epsilon(1e-5)
	if want := eps(1, 30, 300); math.Abs(got-want) > 1e-12*want {
		t.Errorf("composed runs: ε %v, want %v", got, want)
	}
}

// TestCalibrate: the σ returned spends at most ε, and 0.1% less noise
// spends more.
func TestCalibrate(t *testing.T) {
	for _, c := range []struct {
		eps, delta, q float64
		steps         int
	}{{1, 1e-5, 1, 1500}, {4, 1e-5, 1, 24}, {16, 1e-6, 1, 3000}, {1, 1e-5, 0.01, 10000}, {0.5, 1e-5, 1, 1}} {
		sigma, err := Calibrate(c.eps, c.delta, c.q, c.steps)
		if err != nil {
			t.Fatal(err)
		}
		spent := func(s float64) float64 {
			var a Accountant
			if err := a.Add(c.q, s, c.steps); err != nil {
				t.Fatal(err)
			}
			e, _, _ := a.Epsilon(c.delta)
			return e
		}
		if e := spent(sigma); e > c.eps {
			t.Errorf("%+v: σ %v spends ε %v", c, sigma, e)
		}
		if e := spent(sigma * (1 - 1e-3)); e <= c.eps {
			t.Errorf("%+v: σ %v is not the smallest: %v spends ε %v", c, sigma, sigma*(1-1e-3), e)
		}
	}
}

// TestErrors: every parameter out of its domain is an error.
func TestErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
	}{
		{"rdp q > 1", func() error { _, err := SubsampledGaussianRDP(1.5, 1, 2); return err }()},
		{"rdp σ = 0", func() error { _, err := SubsampledGaussianRDP(0.5, 0, 2); return err }()},
		{"rdp α = 1", func() error { _, err := SubsampledGaussianRDP(0.5, 1, 1); return err }()},
		{"add negative steps", (&Accountant{}).Add(1, 1, -1)},
		{"add σ = NaN", (&Accountant{}).Add(1, math.NaN(), 1)},
		{"epsilon δ = 0", func() error { _, _, err := (&Accountant{}).Epsilon(0); return err }()},
		{"calibrate ε = 0", func() error { _, err := Calibrate(0, 1e-5, 1, 1); return err }()},
		{"calibrate ε = inf", func() error { _, err := Calibrate(math.Inf(1), 1e-5, 1, 1); return err }()},
		{"calibrate δ = 1", func() error { _, err := Calibrate(1, 1, 1, 1); return err }()},
		{"calibrate q = 0", func() error { _, err := Calibrate(1, 1e-5, 0, 1); return err }()},
		{"calibrate 0 steps", func() error { _, err := Calibrate(1, 1e-5, 1, 0); return err }()},
	} {
		if !errors.Is(c.err, ErrParams) {
			t.Errorf("%s: %v, want ErrParams", c.name, c.err)
		}
	}
}

func BenchmarkCalibrate(b *testing.B) {
	for b.Loop() {
		if _, err := Calibrate(1, 1e-5, 1, 1500); err != nil {
			b.Fatal(err)
		}
	}
}
