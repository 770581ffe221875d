package federation

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/glm"
	"github.com/crffd/crffd/inference"
)

// StepNuisance is the step of a private site's nuisance models: the
// sufficient statistics, per arm, from which it fits the propensity and
// outcome models of its AIPW scores (estimator.Setup.NuisanceStats), one
// Gaussian mechanism of sensitivity glm.Sensitivity(covariates). The
// statistics never leave the site; their noise makes the models, and so
// each row's ψ, a function of that row and of a differentially private
// release alone, which the sensitivity of the released Σψ needs.
const StepNuisance = "nuisance"

// ShareNuisance is the nuisance models' weight among the Share* weights:
// the models set the bias of the AIPW, which its interval cannot show, so
// they get nearly as much as the ATE's sums.
const ShareNuisance = 4

// nuisanceRelease is the nuisance step's release, for runs whose ATE or
// model selection is released with noise.
var nuisanceRelease = release{step: StepNuisance, count: 1, share: ShareNuisance}

// privateNuisance reports whether the site fits its nuisance models from
// noised statistics: when it releases the ATE's sums or model selection's
// held-out losses with noise, both of which sum ψ.
func (s *site) privateNuisance() bool {
	p := s.cfg.Privacy
	return p != nil && (!p.IsExact(ExactATE) || s.noisySelection())
}

// fitPrivateNuisance returns the nuisances of the rows d of a site private
// under p: fitted from their sufficient statistics (setup.NuisanceStats)
// after noise(v, sensitivity) adds N(0, (σ·sensitivity)²) to each, σ the
// step's noise multiplier sigma.
func fitPrivateNuisance(p *SitePrivacy, setup *estimator.Setup, d *estimator.Data, sigma float64,
	noise func(v []float64, sensitivity float64) error) (inference.Nuisance, error) {
	b, ok := p.outcomeBound(setup.Schema)
	if !ok {
		return inference.Nuisance{}, fmt.Errorf("%w: a private site's nuisance models need the outcome's public bound in privacy.bounds", ErrLimit)
	}
	stats, err := setup.NuisanceStats(d, b.Lo, b.Hi)
	if err != nil {
		return inference.Nuisance{}, err
	}
	v := stats.Vector()
	sens := glm.Sensitivity(stats.D)
	if err := noise(v, sens); err != nil {
		return inference.Nuisance{}, err
	}
	noised, err := glm.StatsFromVector(stats.D, v)
	if err != nil {
		return inference.Nuisance{}, err
	}
	m, err := glm.FitPrivate(noised, sigma*sens)
	if err != nil {
		return inference.Nuisance{}, fmt.Errorf("privacy: the nuisance models: %w", err)
	}
	return setup.PrivateNuisance(m, d, b.Lo, b.Hi)
}

// Nuisance returns the nuisances a site private under p computes of its
// rows d in a run of setup whose nuisance step has noise multiplier sigma
// (RunNoise.Nuisance), drawing the noise from r.
func (p *SitePrivacy) Nuisance(setup *estimator.Setup, d *estimator.Data, sigma float64, r *rand.Rand) (inference.Nuisance, error) {
	if !(sigma > 0) || math.IsInf(sigma, 0) {
		return inference.Nuisance{}, fmt.Errorf("privacy: the nuisance models' noise multiplier is %v", sigma)
	}
	return fitPrivateNuisance(p, setup, d, sigma, gaussianNoise(sigma, r))
}
