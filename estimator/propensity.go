package estimator

import "gonum.org/v1/gonum/mat"

// fixedLayer returns the feature layer of map k on inputs that do not change
// between rounds, building it (and its pre-activations) on first use.
func (s *Site) fixedLayer(l **rffLayer, k int, input func() *mat.Dense) *rffLayer {
	if *l == nil {
		*l = newRFFLayer(s.setup.Maps[k], s.n)
		(*l).setInput(input())
	}
	return *l
}

// propensity computes the propensity model's site loss, the Bernoulli
// negative log-likelihood
//
//	J^(s) = Σ_i softplus(ℓ_i) − w_i·ℓ_i,   ℓ = φ(x)ᵀW_psi,
//
// with ∂J/∂ℓ = σ(ℓ) − w.
func (s *Site) propensity(in *SiteInput, out *SiteOutput) {
	l := s.fixedLayer(&s.prop, mapPropensity, func() *mat.Dense { return s.x })
	psi := in.Weights["psi"]
	l.forward(in.Shared["a"][0])

	logit, dl := s.col, s.dcol
	matVec(logit, l.phi, psi)
	var loss float64
	for i := range s.n {
		v := logit.At(i, 0)
		loss += softplus(v) - s.w[i]*v
		dl.Set(i, 0, sigmoid(v)-s.w[i])
	}
	out.Loss = loss
	matTVec(out.Grads["psi"], l.phi, dl)
	outer(l.dphi, dl, psi)
	out.Shared["a"][0] = l.backward(l.dphi)
}
