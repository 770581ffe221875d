package estimator

import (
	"math"

	"gonum.org/v1/gonum/mat"
)

// outcome computes the outcome model's site loss. The mean is
// μ_i = φ(x_i)ᵀW_beta{w_i}; rows are arm-sorted, so each arm's weights act on
// one contiguous block of φ. For a continuous outcome with log noise scale t,
//
//	J^(s) = n·t + Σ_i (y_i − μ_i)² / (2e^{2t}),
//
// so ∂J/∂μ = −(y−μ)e^{−2t} and ∂J/∂t = n − Σ(y−μ)²e^{−2t}. For a binary
// outcome J^(s) is the Bernoulli negative log-likelihood with logit μ.
func (s *Site) outcome(in *SiteInput, out *SiteOutput) {
	l := s.fixedLayer(&s.out, mapOutcome, func() *mat.Dense { return s.x })
	l.forward(in.Shared["a"][0])
	binary := s.setup.Schema.BinaryOutcome

	mu, dmu := s.col, s.dcol
	phi0, phi1 := s.arms(l.phi)
	mu0, mu1 := s.arms(mu)
	dmu0, dmu1 := s.arms(dmu)
	dphi0, dphi1 := s.arms(l.dphi)
	b0, b1 := in.Weights["beta0"], in.Weights["beta1"]
	if phi0 != nil {
		matVec(mu0, phi0, b0)
	}
	if phi1 != nil {
		matVec(mu1, phi1, b1)
	}

	var loss, sq float64
	var inv2 float64
	if !binary {
		inv2 = math.Exp(-2 * in.Shared["t"][0])
	}
	for i := range s.n {
		m := mu.At(i, 0)
		y := s.y[i]
		if binary {
			loss += softplus(m) - y*m
			dmu.Set(i, 0, sigmoid(m)-y)
			continue
		}
		r := y - m
		sq += r * r
		dmu.Set(i, 0, -r*inv2)
	}
	g0, g1 := out.Grads["beta0"], out.Grads["beta1"]
	g0.Zero()
	g1.Zero()
	if phi0 != nil {
		matTVec(g0, phi0, dmu0)
		outer(dphi0, dmu0, b0)
	}
	if phi1 != nil {
		matTVec(g1, phi1, dmu1)
		outer(dphi1, dmu1, b1)
	}
	if !binary {
		t := in.Shared["t"][0]
		n := float64(s.n)
		loss = n*t + 0.5*sq*inv2
		out.Shared["t"][0] = n - sq*inv2
	}
	out.Loss = loss
	out.Shared["a"][0] = l.backward(l.dphi)
}
