package synth

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/crffd/crffd/dataset"
)

// DefaultProxies is the number of proxy covariates of the paper's design,
// used when Design.Proxies is zero.
const DefaultProxies = 30

// ErrDesign means that a Design, or the arguments of UniformDeltas or
// PopulationATE, are out of range. The wrapping error says which field and
// why.
var ErrDesign = errors.New("synth: invalid design")

// Constants of the model; see the package documentation.
const (
	classes = 5

	b0 = 0.0 // treatment intercept

	c0 = 0.9 // y(0) intercept, real outcomes
	d0 = 7.9 // y(1) intercept, real outcomes

	binC0 = -1.0 // y(0) intercept, binary outcomes
	binD0 = 1.0  // y(1) intercept, binary outcomes
)

// coefSigma is the standard deviation of the coefficients: N(0, 2) is read
// as variance 2.
var coefSigma = math.Sqrt2

// rho holds the class probabilities of the latent z.
var rho = [classes]float64{0.11, 0.17, 0.34, 0.26, 0.12}

// Second PCG seed words, one per use, so that the streams differ.
const (
	worldStream  = 0x6372666664776f72 // "crffdwor"
	sourceStream = 0x6372666664737263 // "crffdsrc"
	deltaStream  = 0x6372666664646c74 // "crffddlt"
)

// Design describes one synthetic data set: Sources sources of Rows rows each.
type Design struct {
	// Name selects the model: "" or DesignPaper for the paper's design, or
	// one of the simple designs DesignLinearConstant, DesignLinearVarying,
	// DesignLogNormal and DesignBinary (see the package documentation and
	// DesignNames).
	Name string
	// Sources is the number of sources, at least 1.
	Sources int
	// Rows is the number of rows of every source, at least 1.
	Rows int
	// Delta holds the shift Δ of every source, in order. It must be nil,
	// meaning Δ = 0 for all sources, or have one finite value per source.
	// In the simple designs Δ is the mean of the covariate score.
	Delta []float64
	// Proxies is the number of proxy covariates of the paper's design; 0
	// means DefaultProxies. The simple designs have their own three
	// covariates and need Proxies = 0.
	Proxies int
	// Seed selects the coefficients and every random draw.
	Seed uint64
	// BinaryOutcome selects the binary-outcome variant of the paper's
	// design. The simple designs refuse it: DesignBinary is their binary
	// outcome.
	BinaryOutcome bool
}

// validate checks d and returns its number of proxies.
func (d Design) validate() (proxies int, err error) {
	switch {
	case !isDesign(d.Name):
		return 0, unknownDesign(d.Name)
	case d.Sources < 1:
		return 0, fmt.Errorf("%w: %d sources, want at least 1", ErrDesign, d.Sources)
	case d.Rows < 1:
		return 0, fmt.Errorf("%w: %d rows per source, want at least 1", ErrDesign, d.Rows)
	case d.Proxies < 0:
		return 0, fmt.Errorf("%w: %d proxies, want at least 0", ErrDesign, d.Proxies)
	case d.Delta != nil && len(d.Delta) != d.Sources:
		return 0, fmt.Errorf("%w: %d values of Δ for %d sources", ErrDesign, len(d.Delta), d.Sources)
	}
	for s, v := range d.Delta {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("%w: Δ of source %d is %v", ErrDesign, s+1, v)
		}
	}
	if isSimple(d.Name) {
		switch {
		case d.Proxies != 0:
			return 0, fmt.Errorf("%w: %d proxies: design %s has its own covariates (age, sex, score), want Proxies 0", ErrDesign, d.Proxies, d.Name)
		case d.BinaryOutcome:
			return 0, fmt.Errorf("%w: BinaryOutcome is a variant of the paper's design, not of design %s; use design %s for a binary outcome", ErrDesign, d.Name, DesignBinary)
		}
		return 0, nil
	}
	if d.Proxies == 0 {
		return DefaultProxies, nil
	}
	return d.Proxies, nil
}

// Generate draws the data set that d describes and returns one table per
// source, in order. Every table passes dataset.Table.Validate; write them
// with dataset.Write, one file per source or, after dataset.Concat, one file
// with the sources as consecutive blocks. Design.Covariates names the
// columns of X. An invalid design, or a shift so large that a simple
// design's values overflow, is an error wrapping ErrDesign.
func Generate(d Design) ([]*dataset.Table, error) {
	proxies, err := d.validate()
	if err != nil {
		return nil, err
	}
	if isSimple(d.Name) {
		return generateSimple(d)
	}
	wd := newWorld(d.Seed, proxies)
	out := make([]*dataset.Table, d.Sources)
	for s := range out {
		var delta float64
		if d.Delta != nil {
			delta = d.Delta[s]
		}
		out[s], _ = wd.source(d.Rows, delta, d.BinaryOutcome, sourceSrc(d.Seed, s))
	}
	return out, nil
}

// UniformDeltas returns n shifts drawn independently from U[lo, hi], as the
// paper does with lo = 0 and hi = 8 for its large setting. The draws are
// determined by seed, and use a stream different from Generate's, so the
// same seed may serve both.
func UniformDeltas(n int, lo, hi float64, seed uint64) ([]float64, error) {
	switch {
	case n < 0:
		return nil, fmt.Errorf("%w: %d values of Δ requested", ErrDesign, n)
	case math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) || lo > hi:
		return nil, fmt.Errorf("%w: Δ range [%v, %v]", ErrDesign, lo, hi)
	}
	u := distuv.Uniform{Min: lo, Max: hi, Src: rand.NewPCG(seed, deltaStream)}
	deltas := make([]float64, n)
	for i := range deltas {
		deltas[i] = u.Rand()
	}
	return deltas, nil
}

// world holds the coefficients shared by all sources.
type world struct {
	a0     []float64          // a_j0, one per proxy
	a1     [][classes]float64 // a_j1, one per proxy
	b1     [classes]float64
	c1, d1 [classes]float64
}

// newWorld draws the coefficients for seed. The treatment and outcome
// coefficients come first, so that they do not depend on the number of
// proxies.
func newWorld(seed uint64, proxies int) *world {
	n := distuv.Normal{Mu: 0, Sigma: coefSigma, Src: rand.NewPCG(seed, worldStream)}
	w := &world{a0: make([]float64, proxies), a1: make([][classes]float64, proxies)}
	for _, v := range []*[classes]float64{&w.b1, &w.c1, &w.d1} {
		for k := range v {
			v[k] = n.Rand()
		}
	}
	for j := range w.a0 {
		w.a0[j] = n.Rand()
		for k := range w.a1[j] {
			w.a1[j][k] = n.Rand()
		}
	}
	return w
}

// sourceSrc returns the random source of source s (0-based).
func sourceSrc(seed uint64, s int) rand.Source {
	return rand.NewPCG(seed, mix(sourceStream+uint64(s)))
}

// mix is the SplitMix64 finaliser; it spreads consecutive source indices
// over the PCG seed space.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// source draws one source of n rows with shift delta from src. It also
// returns the latent class of every row, for tests.
func (w *world) source(n int, delta float64, binary bool, src rand.Source) (*dataset.Table, []int) {
	dx := len(w.a0)
	t := &dataset.Table{
		X:   mat.NewDense(n, dx, nil),
		W:   make([]float64, n),
		Y:   make([]float64, n),
		YCF: make([]float64, n),
		Mu0: make([]float64, n),
		Mu1: make([]float64, n),
	}
	class := make([]int, n)
	z := distuv.NewCategorical(rho[:], src)
	noise := distuv.Normal{Mu: 0, Sigma: 1, Src: src}
	bern := func(p float64) float64 { return distuv.Bernoulli{P: p, Src: src}.Rand() }
	row := make([]float64, dx)
	for i := range n {
		k := int(z.Rand())
		class[i] = k
		for j := range row {
			row[j] = bern(sigmoid(w.a0[j] + w.a1[j][k]))
		}
		t.X.SetRow(i, row)
		t.W[i] = bern(sigmoid(b0 + w.b1[k] + delta))

		var y0, y1 float64
		if binary {
			t.Mu0[i] = sigmoid(binC0 + w.c1[k] + delta)
			t.Mu1[i] = sigmoid(binD0 + w.d1[k] + delta)
			y0, y1 = bern(t.Mu0[i]), bern(t.Mu1[i])
		} else {
			t.Mu0[i] = softplus(c0 + w.c1[k] + delta)
			t.Mu1[i] = softplus(d0 + w.d1[k] + delta)
			y0, y1 = t.Mu0[i]+noise.Rand(), t.Mu1[i]+noise.Rand()
		}
		if t.W[i] == 1 {
			t.Y[i], t.YCF[i] = y1, y0
		} else {
			t.Y[i], t.YCF[i] = y0, y1
		}
	}
	return t, class
}

// sigmoid returns the logistic function 1/(1+e^-u).
func sigmoid(u float64) float64 {
	if u >= 0 {
		return 1 / (1 + math.Exp(-u))
	}
	e := math.Exp(u)
	return e / (1 + e)
}

// softplus returns log(1+e^u) without overflow.
func softplus(u float64) float64 {
	if u > 0 {
		return u + math.Log1p(math.Exp(-u))
	}
	return math.Log1p(math.Exp(u))
}
