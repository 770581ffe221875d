package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"gonum.org/v1/gonum/integrate/quad"
	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/crffd/crffd/dataset"
)

// Names of the designs of Generate, for Design.Name. The empty name means
// DesignPaper.
const (
	// DesignPaper is the paper's design: latent classes and binary proxies.
	DesignPaper = "paper"
	// DesignLinearConstant is a linear outcome with the constant effect 2.
	DesignLinearConstant = "linear-constant"
	// DesignLinearVarying is a linear outcome with an effect linear in sex
	// and score, of mean 2.
	DesignLinearVarying = "linear-varying"
	// DesignLogNormal is a positive, log-normal outcome with a
	// multiplicative effect.
	DesignLogNormal = "lognormal"
	// DesignBinary is a binary outcome from a logistic model.
	DesignBinary = "binary"
	// DesignRough is the linear outcome plus an effect that is a rough
	// (Matérn-½) random function of score, drawn from the seed.
	DesignRough = "rough"
)

// designNames lists the valid design names, the paper's first.
var designNames = []string{DesignPaper, DesignLinearConstant, DesignLinearVarying, DesignLogNormal, DesignBinary, DesignRough}

// DesignNames returns the names that Design.Name accepts, in a new slice,
// the paper's design first.
func DesignNames() []string {
	return append([]string(nil), designNames...)
}

// simpleCovariates names the covariates of the simple designs, in order.
var simpleCovariates = []string{"age", "sex", "score"}

// Constants of the simple designs; see the package documentation.
const (
	ageMean = 50.0 // age ~ N(ageMean, ageSD²), in years
	ageSD   = 10.0
	sexP    = 0.5 // sex ~ Bern(sexP)

	// Treatment: logit = propIntercept + propAge·a + propScore·score,
	// where a = (age - ageMean)/ageSD.
	propIntercept = 0.0
	propAge       = 0.8
	propScore     = 0.8

	// Linear designs: mu0 = linIntercept + linAge·a + linSex·sex + linScore·score.
	linIntercept = 1.0
	linAge       = 1.0
	linSex       = 0.5
	linScore     = 1.5

	constEffect = 2.0 // linear-constant: mu1 = mu0 + constEffect

	// linear-varying: τ(x) = varIntercept + varSex·sex + varScore·score.
	varIntercept = 1.5
	varSex       = 1.0
	varScore     = 1.0

	// lognormal: log y(w) = logAge·a + logSex·sex + logScore·score + logEffect·w + logSigma·ε.
	logAge    = 0.3
	logSex    = 0.2
	logScore  = 0.5
	logEffect = 0.75
	logSigma  = 0.8

	// binary: logit P(y(w) = 1) = binaryIntercept + binaryAge·a + binarySex·sex + binaryScore·score + binaryEffect·w.
	binaryIntercept = -0.5
	binaryAge       = 0.5
	binarySex       = 0.3
	binaryScore     = 0.8
	binaryEffect    = 1.0

	// rough: τ(x) = roughIntercept + roughScale·r(score), r a Matérn-½
	// path of unit variance and lengthscale roughLength (see roughPath).
	roughIntercept = 2.0
	roughScale     = 1.0
	roughLength    = 0.25
	roughFeatures  = 2000
)

// Second PCG seed words of the simple designs: one stream per source for
// the covariates and the treatment, another for the outcomes, so that the
// designs share their covariates and treatments for a seed. Source s uses
// mix(word + s), as the paper's design does with sourceStream, so the
// words differ in their high bytes: words that differed by k would give
// source s + k of one family the stream of source s of the other.
const (
	simpleXStream = 0x785f73696d706c65 // "x_simple"
	simpleYStream = 0x795f73696d706c65 // "y_simple"
	roughStream   = 0x726f7567685f6670 // "rough_fp": the rough design's function
)

// hermitePoints is the number of Gauss–Hermite nodes of PopulationATE's
// quadrature; the integrand is smooth and bounded, and 100 nodes agree
// with 20 to 12 digits.
const hermitePoints = 100

// isSimple reports whether name is one of the simple designs.
func isSimple(name string) bool {
	return name != "" && name != DesignPaper && isDesign(name)
}

// isDesign reports whether name is a valid design name, "" included.
func isDesign(name string) bool {
	if name == "" {
		return true
	}
	for _, n := range designNames {
		if n == name {
			return true
		}
	}
	return false
}

// unknownDesign returns the error for a design name that is not valid.
func unknownDesign(name string) error {
	return fmt.Errorf("%w: unknown design %q; want one of %s", ErrDesign, name, strings.Join(designNames, ", "))
}

// Covariates returns the names of the covariate columns of the tables that
// Generate draws for d, in order: x1, x2, ... for the paper's design, and
// age, sex, score for the simple designs. It returns nil for an unknown
// design name or a negative number of proxies.
func (d Design) Covariates() []string {
	switch {
	case d.Proxies < 0:
		return nil
	case d.Name == "" || d.Name == DesignPaper:
		p := d.Proxies
		if p == 0 {
			p = DefaultProxies
		}
		names := make([]string, p)
		for j := range names {
			names[j] = fmt.Sprintf("x%d", j+1)
		}
		return names
	case isSimple(d.Name):
		return append([]string(nil), simpleCovariates...)
	}
	return nil
}

// PopulationATE returns the true population average treatment effect
// E[mu1(x) - mu0(x)] of the simple design name, for a source whose score
// has mean delta (see the package documentation). The true ATE of a drawn
// table, the mean of its Tau, differs from it by sampling error. For the
// paper's design the ATE depends on the coefficients drawn from the seed,
// so PopulationATE returns an error wrapping ErrDesign for it, as for an
// unknown name, a non-finite delta, or an ATE too large for a float64.
func PopulationATE(name string, delta float64) (float64, error) {
	if math.IsNaN(delta) || math.IsInf(delta, 0) {
		return 0, fmt.Errorf("%w: Δ is %v", ErrDesign, delta)
	}
	var ate float64
	switch name {
	case DesignLinearConstant:
		ate = constEffect
	case DesignLinearVarying:
		ate = varIntercept + varSex*sexP + varScore*delta
	case DesignLogNormal:
		// E[exp(m(x))] factorises over the independent covariates:
		// a ~ N(0, 1), sex ~ Bern(sexP), score ~ N(delta, 1).
		em := math.Exp(logAge*logAge/2) * (1 - sexP + sexP*math.Exp(logSex)) *
			math.Exp(logScore*delta+logScore*logScore/2)
		ate = (math.Exp(logEffect) - 1) * math.Exp(logSigma*logSigma/2) * em
	case DesignBinary:
		// Given sex, the linear predictor η is normal; integrate
		// σ(η + effect) - σ(η) against it by Gauss–Hermite quadrature.
		v := binaryAge*binaryAge + binaryScore*binaryScore
		for _, sex := range []float64{0, 1} {
			mean := binaryIntercept + binarySex*sex + binaryScore*delta
			f := func(u float64) float64 {
				eta := mean + math.Sqrt(2*v)*u
				return sigmoid(eta+binaryEffect) - sigmoid(eta)
			}
			p := sexP
			if sex == 0 {
				p = 1 - sexP
			}
			ate += p * quad.Fixed(f, math.Inf(-1), math.Inf(1), hermitePoints, quad.Hermite{}, 0) / math.SqrtPi
		}
	case "", DesignPaper, DesignRough:
		return 0, fmt.Errorf("%w: the ATE of design %q depends on the seed; take the mean of Table.Tau", ErrDesign, name)
	default:
		return 0, unknownDesign(name)
	}
	if math.IsNaN(ate) || math.IsInf(ate, 0) {
		return 0, fmt.Errorf("%w: ATE of design %s at Δ = %v is %v", ErrDesign, name, delta, ate)
	}
	return ate, nil
}

// generateSimple draws the simple design d, already validated.
func generateSimple(d Design) ([]*dataset.Table, error) {
	out := make([]*dataset.Table, d.Sources)
	var rough func(float64) float64
	if d.Name == DesignRough {
		rough = roughPath(rand.NewPCG(d.Seed, mix(roughStream)))
	}
	for s := range out {
		var delta float64
		if d.Delta != nil {
			delta = d.Delta[s]
		}
		t := simpleSource(d.Name, d.Rows, delta,
			rand.NewPCG(d.Seed, mix(simpleXStream+uint64(s))),
			rand.NewPCG(d.Seed, mix(simpleYStream+uint64(s))), rough)
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("%w: design %s, source %d with Δ = %v: %w", ErrDesign, d.Name, s+1, delta, err)
		}
		out[s] = t
	}
	return out, nil
}

// roughPath draws a function r(u) = √(2/J) Σ_j a_j cos(ω_j u/ℓ + b_j)
// with J = roughFeatures, a_j ~ N(0, 1), b_j ~ U[0, 2π) and ω_j standard
// Cauchy, the spectral density of the Matérn-½ (exponential) kernel
// exp(−|u − u'|/ℓ): a random-feature draw of that Gaussian process,
// continuous and nowhere smooth (up to the finite J), with variance 1.
func roughPath(src rand.Source) func(float64) float64 {
	omega := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: 1, Src: src}
	norm := distuv.Normal{Mu: 0, Sigma: 1, Src: src}
	unif := distuv.Uniform{Min: 0, Max: 2 * math.Pi, Src: src}
	w, b, a := make([]float64, roughFeatures), make([]float64, roughFeatures), make([]float64, roughFeatures)
	for j := range w {
		w[j], b[j], a[j] = omega.Rand()/roughLength, unif.Rand(), norm.Rand()
	}
	c := math.Sqrt(2.0 / roughFeatures)
	return func(u float64) float64 {
		var s float64
		for j := range w {
			s += a[j] * math.Cos(w[j]*u+b[j])
		}
		return c * s
	}
}

// simpleSource draws n rows of the simple design name with score mean
// delta: the covariates and the treatment from xsrc, the outcomes from
// ysrc; rough is the rough design's function. Every row takes the same
// draws from each source whatever the design and delta are.
func simpleSource(name string, n int, delta float64, xsrc, ysrc rand.Source, rough func(float64) float64) *dataset.Table {
	t := &dataset.Table{
		X:   mat.NewDense(n, len(simpleCovariates), nil),
		W:   make([]float64, n),
		Y:   make([]float64, n),
		YCF: make([]float64, n),
		Mu0: make([]float64, n),
		Mu1: make([]float64, n),
	}
	age := distuv.Normal{Mu: ageMean, Sigma: ageSD, Src: xsrc}
	score := distuv.Normal{Mu: 0, Sigma: 1, Src: xsrc}
	xbern := func(p float64) float64 { return distuv.Bernoulli{P: p, Src: xsrc}.Rand() }
	noise := distuv.Normal{Mu: 0, Sigma: 1, Src: ysrc}
	ybern := func(p float64) float64 { return distuv.Bernoulli{P: p, Src: ysrc}.Rand() }
	for i := range n {
		ag := age.Rand()
		sex := xbern(sexP)
		sc := delta + score.Rand()
		t.X.SetRow(i, []float64{ag, sex, sc})
		a := (ag - ageMean) / ageSD
		t.W[i] = xbern(sigmoid(propIntercept + propAge*a + propScore*sc))

		var mu0, mu1, y0, y1 float64
		switch name {
		case DesignLinearConstant, DesignLinearVarying, DesignRough:
			m := linIntercept + linAge*a + linSex*sex + linScore*sc
			tau := constEffect
			switch name {
			case DesignLinearConstant:
				mu0, mu1 = exactEffect(m, constEffect)
			case DesignLinearVarying:
				tau = varIntercept + varSex*sex + varScore*sc
				mu0, mu1 = m, m+tau
			default:
				tau = roughIntercept + roughScale*rough(sc)
				mu0, mu1 = m, m+tau
			}
			// From m rather than mu0, so that the linear designs share
			// y(0) exactly.
			y0, y1 = m+noise.Rand(), m+tau+noise.Rand()
		case DesignLogNormal:
			m := logAge*a + logSex*sex + logScore*sc
			mu0 = math.Exp(m + logSigma*logSigma/2)
			mu1 = math.Exp(m + logEffect + logSigma*logSigma/2)
			y0 = math.Exp(m + logSigma*noise.Rand())
			y1 = math.Exp(m + logEffect + logSigma*noise.Rand())
		case DesignBinary:
			eta := binaryIntercept + binaryAge*a + binarySex*sex + binaryScore*sc
			mu0, mu1 = sigmoid(eta), sigmoid(eta+binaryEffect)
			y0, y1 = ybern(mu0), ybern(mu1)
		}
		t.Mu0[i], t.Mu1[i] = mu0, mu1
		if t.W[i] == 1 {
			t.Y[i], t.YCF[i] = y1, y0
		} else {
			t.Y[i], t.YCF[i] = y0, y1
		}
	}
	return t
}

// exactEffect returns mu0 ≈ m and mu1 = mu0 + c such that mu1 - mu0 is
// exactly c in floating point, for c > 0 a multiple of the spacing of
// the doubles near m and m + c (c = 2 and |m| < 2⁵³ will do). It rounds
// the value of larger magnitude and obtains the other from it by a
// subtraction towards zero, which is exact; mu0 then differs from m by at
// most half a unit in the last place of m + c.
func exactEffect(m, c float64) (mu0, mu1 float64) {
	if m >= -c/2 { // |m + c| ≥ |m|
		mu1 = m + c
		return mu1 - c, mu1
	}
	return m, m + c
}
