package federation

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

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

// NuisanceRowsPerNoise is how many rows a private site needs per unit of
// the noise's standard deviation on each entry of its nuisance statistics
// (σ·glm.Sensitivity) to fit its nuisance models from them; with fewer it
// takes the run's DP-trained propensity and outcome models instead, and
// does not charge the step. The noise on the arms' counts and sums is
// that standard deviation, so below about ten rows per unit the arms'
// means and the treated share are off by tens of percent, and the
// propensity with them. Measured on the paper's design (30 binary
// covariates, 800 scored rows, docs/privacy.md): 12.8 rows per unit (ε =
// 16) cut the AIPW's error by a quarter against the DP-trained models;
// 3.7 (ε = 4) raised it fourfold.
const NuisanceRowsPerNoise = 10

// calibrateNuisance is calibrateRun, whose releases rel drop the
// nuisance step unless p.NuisanceStatistics, and when its noise would
// leave fewer than
// NuisanceRowsPerNoise of the scored rows per unit of the noise on each
// of the statistics of d covariates. The rule reads only public figures,
// the row counts and the noise, so the choice costs nothing.
func calibrateNuisance(p *SitePrivacy, run string, cfg estimator.Config, rows, scored, d int, further []string, rel []release) (runCharge, []Charge, error) {
	drop := func(r release) bool { return r == nuisanceRelease }
	if !p.NuisanceStatistics {
		return calibrateRun(p, run, cfg, rows, further, slices.DeleteFunc(slices.Clone(rel), drop))
	}
	rc, charges, err := calibrateRun(p, run, cfg, rows, further, rel)
	if err != nil || !slices.Contains(rel, nuisanceRelease) {
		return rc, charges, err
	}
	if rc.aggregate(StepNuisance)*glm.Sensitivity(d)*NuisanceRowsPerNoise <= float64(scored) {
		return rc, charges, nil
	}
	return calibrateRun(p, run, cfg, rows, further, slices.DeleteFunc(slices.Clone(rel), drop))
}

// nuisanceRelease is the nuisance step's release, for runs whose ATE or
// model selection is released with noise.
var nuisanceRelease = release{step: StepNuisance, count: 1, share: ShareNuisance}

// privateNuisance reports whether the site's nuisance models must be a
// private release: when it releases the ATE's sums or model selection's
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
	stats, err := setup.NuisanceStats(d)
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
	return setup.PrivateNuisance(m, d)
}

// Nuisance returns the nuisances a site private under p computes of the
// rows d of site index under model m in a run whose nuisance step has
// noise multiplier sigma (RunNoise.Nuisance), drawing the noise from r:
// fitted from their noised statistics, or with sigma 0 (the run could
// not afford them, calibrateNuisance) m's own DP-trained models'.
func (p *SitePrivacy) Nuisance(m *estimator.Model, index int, d *estimator.Data, sigma float64, r *rand.Rand) (inference.Nuisance, error) {
	if sigma == 0 {
		return m.Nuisance(index, d)
	}
	if !(sigma > 0) || math.IsInf(sigma, 0) {
		return inference.Nuisance{}, fmt.Errorf("privacy: the nuisance models' noise multiplier is %v", sigma)
	}
	return fitPrivateNuisance(p, m.Setup, d, sigma, gaussianNoise(sigma, r))
}
