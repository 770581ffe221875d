package synth

import (
	"errors"
	"gonum.org/v1/gonum/stat"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/dataset"
)

// simpleNames lists the simple designs.
var simpleNames = []string{DesignLinearConstant, DesignLinearVarying, DesignLogNormal, DesignBinary}

// documentedATE holds the true ATE at Δ = 0 that the package documentation
// states for each simple design.
var documentedATE = map[string]float64{
	DesignLinearConstant: 2,
	DesignLinearVarying:  2,
	DesignLogNormal:      2.025138764280,
	DesignBinary:         0.2060236556,
}

// generateOne draws one source of n rows of design name with shift delta.
func generateOne(t *testing.T, name string, n int, delta float64, seed uint64) *dataset.Table {
	t.Helper()
	src, err := Generate(Design{Name: name, Sources: 1, Rows: n, Delta: []float64{delta}, Seed: seed})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return src[0]
}

// column returns column j of t's covariates.
func column(t *dataset.Table, j int) []float64 {
	return mat.Col(nil, j, t.X)
}

func TestSimpleDeterminism(t *testing.T) {
	for _, name := range simpleNames {
		d := Design{Name: name, Sources: 3, Rows: 200, Delta: []float64{0, 1, -1}, Seed: 42}
		a, err := Generate(d)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Generate(d)
		for s := range a {
			if !equal(a[s], b[s]) {
				t.Errorf("%s: source %d differs between two runs with the same seed", name, s+1)
			}
			if err := a[s].Validate(); err != nil {
				t.Errorf("%s: source %d: %v", name, s+1, err)
			}
			if r, c := a[s].X.Dims(); r != 200 || c != 3 {
				t.Errorf("%s: source %d is %d×%d, want 200×3", name, s+1, r, c)
			}
		}
		d.Seed = 43
		c, _ := Generate(d)
		for s := range a {
			if slices.Equal(a[s].Y, c[s].Y) || mat.Equal(a[s].X, c[s].X) {
				t.Errorf("%s: source %d is the same for seeds 42 and 43", name, s+1)
			}
		}
		more, _ := Generate(Design{Name: name, Sources: 4, Rows: 200, Delta: []float64{0, 1, -1, 3}, Seed: 42})
		for s := range a {
			if !equal(a[s], more[s]) {
				t.Errorf("%s: source %d changes when more sources are generated", name, s+1)
			}
		}
		if slices.Equal(column(a[0], 0), column(a[1], 0)) {
			t.Errorf("%s: sources 1 and 2 have the same ages", name)
		}
		paper, _ := Generate(Design{Sources: 1, Rows: 200, Seed: 42})
		if slices.Equal(paper[0].W, a[0].W) && slices.Equal(paper[0].Y, a[0].Y) {
			t.Errorf("%s: same treatments and outcomes as the paper's design", name)
		}
	}
}

// The simple designs share covariates and treatments for a seed, and the
// linear designs share y(0).
// Sources draw from mix(word + s) for the stream words below; words closer
// than the number of sources would hand one family's stream to another.
func TestStreamWordsApart(t *testing.T) {
	words := map[string]uint64{"sourceStream": sourceStream, "simpleXStream": simpleXStream, "simpleYStream": simpleYStream}
	for a, u := range words {
		for b, v := range words {
			if a < b && max(u, v)-min(u, v) < 1<<40 {
				t.Errorf("%s and %s differ by %d, want at least 2⁴⁰", a, b, max(u, v)-min(u, v))
			}
		}
	}
}

func TestSimpleCommonRandomNumbers(t *testing.T) {
	base := generateOne(t, DesignLinearConstant, 500, 0, 3)
	y0base, _ := potential(base)
	for _, name := range simpleNames[1:] {
		tab := generateOne(t, name, 500, 0, 3)
		if !mat.Equal(tab.X, base.X) || !slices.Equal(tab.W, base.W) {
			t.Errorf("%s: covariates or treatments differ from linear-constant's for the same seed", name)
		}
	}
	varying := generateOne(t, DesignLinearVarying, 500, 0, 3)
	if y0, _ := potential(varying); !slices.Equal(y0, y0base) {
		t.Error("linear-varying and linear-constant have different y(0) for the same seed")
	}
}

func TestSimpleATE(t *testing.T) {
	const n = 200000
	for _, tc := range []struct {
		name  string
		delta float64
	}{
		{DesignLinearConstant, 0}, {DesignLinearVarying, 0}, {DesignLogNormal, 0}, {DesignBinary, 0},
		{DesignLinearConstant, 1}, {DesignLinearVarying, 1}, {DesignLogNormal, 1}, {DesignBinary, 1},
		{DesignLinearVarying, -0.5}, {DesignLogNormal, -0.5}, {DesignBinary, -0.5},
	} {
		want, err := PopulationATE(tc.name, tc.delta)
		if err != nil {
			t.Fatal(err)
		}
		if doc := documentedATE[tc.name]; tc.delta == 0 && math.Abs(want-doc) > 1e-9 {
			t.Errorf("%s: PopulationATE %.12f, documented %.12f", tc.name, want, doc)
		}
		tab := generateOne(t, tc.name, n, tc.delta, 11)
		tau := tab.Tau()
		mean, variance := moments(tau)
		se := math.Sqrt(variance / n)
		if math.Abs(mean-want) > 5*se+1e-12 {
			t.Errorf("%s, Δ %v: mean of mu1 - mu0 over %d rows %.5f, want %.5f (se %.5f)",
				tc.name, tc.delta, n, mean, want, se)
		}
		if tc.name == DesignLinearConstant {
			for i, v := range tau {
				if v != 2 {
					t.Fatalf("linear-constant, Δ %v, row %d: mu1 - mu0 = %v, want exactly 2", tc.delta, i+1, v)
				}
			}
		} else if se == 0 {
			t.Errorf("%s: the CATE does not vary", tc.name)
		}
	}
}

func TestSimpleOutcomeNoise(t *testing.T) {
	const n = 200000
	for _, name := range simpleNames {
		tab := generateOne(t, name, n, 0, 17)
		y0, y1 := potential(tab)
		var errs [2][]float64
		for i := range n {
			mu := [2]float64{tab.Mu0[i], tab.Mu1[i]}
			y := [2]float64{y0[i], y1[i]}
			for arm := range 2 {
				switch name {
				case DesignLinearConstant, DesignLinearVarying:
					errs[arm] = append(errs[arm], y[arm]-mu[arm])
				case DesignLogNormal:
					if !(y[arm] > 0) {
						t.Fatalf("lognormal, row %d: y(%d) = %v, want positive", i+1, arm, y[arm])
					}
					errs[arm] = append(errs[arm], y[arm]/mu[arm])
				case DesignBinary:
					if y[arm] != 0 && y[arm] != 1 {
						t.Fatalf("binary, row %d: y(%d) = %v, want 0 or 1", i+1, arm, y[arm])
					}
					if !(mu[arm] > 0 && mu[arm] < 1) {
						t.Fatalf("binary, row %d: mu%d = %v, want a probability", i+1, arm, mu[arm])
					}
					// Standardised: mean 0 and variance 1 when y ~ Bern(mu).
					errs[arm] = append(errs[arm], (y[arm]-mu[arm])/math.Sqrt(mu[arm]*(1-mu[arm])))
				}
			}
		}
		// What y - mu (or y/mu) should have: its mean and variance.
		wantMean, wantVar := 0.0, 1.0
		if name == DesignLogNormal {
			wantMean, wantVar = 1, math.Exp(logSigma*logSigma)-1
		}
		for arm, e := range errs {
			mean, variance := moments(e)
			if se := math.Sqrt(wantVar / n); math.Abs(mean-wantMean) > 5*se {
				t.Errorf("%s, y(%d): mean noise %.5f, want %v (se %.5f)", name, arm, mean, wantMean, se)
			}
			// The standard error of the sample variance is
			// sqrt((μ4 - σ⁴)/n), μ4 the fourth central moment.
			var m4 float64
			for _, v := range e {
				m4 += math.Pow(v-mean, 4)
			}
			seVar := math.Sqrt((m4/n - variance*variance) / n)
			if math.Abs(variance-wantVar) > 5*seVar {
				t.Errorf("%s, y(%d): noise variance %.4f, want %.4f (se %.4f)", name, arm, variance, wantVar, seVar)
			}
		}
		// The two potential outcomes have independent noise.
		m0, v0 := moments(errs[0])
		m1, v1 := moments(errs[1])
		var cov float64
		for i := range n {
			cov += (errs[0][i] - m0) * (errs[1][i] - m1)
		}
		if corr := cov / float64(n-1) / math.Sqrt(v0*v1); math.Abs(corr) > 5/math.Sqrt(n) {
			t.Errorf("%s: the noises of y(0) and y(1) have correlation %.4f", name, corr)
		}
	}
}

// armMeans returns the means of x over the treated and the control rows.
func armMeans(x, w []float64) (treated, control float64) {
	var nt, nc float64
	for i, v := range x {
		if w[i] == 1 {
			treated += v
			nt++
		} else {
			control += v
			nc++
		}
	}
	return treated / nt, control / nc
}

func TestSimpleCovariatesAndConfounding(t *testing.T) {
	const n = 200000
	// The common difference of arm means of a and score, in units of a:
	// 3.2·E[σ'(N(0, 1.28))] (see the package documentation).
	const imbalance = 0.635089
	for _, name := range simpleNames {
		tab := generateOne(t, name, n, 0, 23)
		age, sex, score := column(tab, 0), column(tab, 1), column(tab, 2)
		for _, c := range []struct {
			what       string
			x          []float64
			mean, sd   float64
			wantBinary bool
		}{
			{"age", age, ageMean, ageSD, false},
			{"sex", sex, sexP, math.Sqrt(sexP * (1 - sexP)), true},
			{"score", score, 0, 1, false},
		} {
			m, v := moments(c.x)
			if se := c.sd / math.Sqrt(n); math.Abs(m-c.mean) > 5*se {
				t.Errorf("%s: mean %s %.4f, want %v", name, c.what, m, c.mean)
			}
			if math.Abs(math.Sqrt(v)-c.sd) > 0.01*c.sd {
				t.Errorf("%s: sd of %s %.4f, want %v", name, c.what, math.Sqrt(v), c.sd)
			}
			if c.wantBinary != !slices.ContainsFunc(c.x, func(v float64) bool { return v != 0 && v != 1 }) {
				t.Errorf("%s: %s binary is %t", name, c.what, !c.wantBinary)
			}
		}

		share, _ := moments(tab.W)
		if share < 0.45 || share > 0.55 {
			t.Errorf("%s: treated share %.4f, want 0.45-0.55 (0.5 in expectation)", name, share)
		}
		var inside float64
		for i := range n {
			p := sigmoid(propIntercept + propAge*(age[i]-ageMean)/ageSD + propScore*score[i])
			if p >= 0.05 && p <= 0.95 {
				inside++
			}
		}
		if inside /= n; inside < 0.98 {
			t.Errorf("%s: %.4f of the propensities within [0.05, 0.95], want at least 0.98", name, inside)
		}

		// The arms differ in age and score (the confounders), not in sex.
		// With w a coin of probability ½, the standard error of a
		// difference of arm means of a unit-variance covariate is 2/√n.
		se := 2 / math.Sqrt(n)
		at, ac := armMeans(age, tab.W)
		if d := (at - ac) / ageSD; math.Abs(d-imbalance) > 5*se {
			t.Errorf("%s: treated are %.3f years older, want %.3f", name, at-ac, 10*imbalance)
		}
		st, sc := armMeans(score, tab.W)
		if math.Abs(st-sc-imbalance) > 5*se {
			t.Errorf("%s: treated score %.3f higher, want %.3f", name, st-sc, imbalance)
		}
		xt, xc := armMeans(sex, tab.W)
		if math.Abs(xt-xc) > 5*se*0.5 {
			t.Errorf("%s: sex differs between arms by %.4f, want 0", name, xt-xc)
		}

		// Confounding biases the naive comparison of the arms upwards.
		yt, yc := armMeans(tab.Y, tab.W)
		ate, err := PopulationATE(name, 0)
		if err != nil {
			ate = stat.Mean(tab.Tau(), nil)
		}
		if naive := yt - yc; naive < ate+0.1*math.Abs(ate) {
			t.Errorf("%s: naive difference %.4f, not clearly above the ATE %.4f", name, naive, ate)
		}
	}
}

func TestSimpleDelta(t *testing.T) {
	for _, name := range simpleNames {
		base := generateOne(t, name, 2000, 0, 5)
		shifted := generateOne(t, name, 2000, 1.5, 5)
		for i := range base.W {
			b, s := base.X.RawRowView(i), shifted.X.RawRowView(i)
			if b[0] != s[0] || b[1] != s[1] || math.Abs(s[2]-b[2]-1.5) > 1e-12 {
				t.Fatalf("%s, row %d: covariates %v at Δ = 0 and %v at Δ = 1.5, want score shifted by 1.5", name, i+1, b, s)
			}
			// Same random numbers, higher propensity.
			if shifted.W[i] < base.W[i] {
				t.Fatalf("%s, row %d: treated at Δ = 0 but not at Δ = 1.5", name, i+1)
			}
		}
		bw, _ := moments(base.W)
		sw, _ := moments(shifted.W)
		if sw <= bw {
			t.Errorf("%s: treated share %.3f at Δ = 1.5, not above %.3f at Δ = 0", name, sw, bw)
		}
	}
}

// On linear-constant, OLS of y on (1, w, age, sex, score) is the correct
// model and recovers the effect 2 as the coefficient of w, while the naive
// difference of arm means does not.
func TestSimpleOLS(t *testing.T) {
	const n = 1000
	for _, seed := range []uint64{1, 2, 3} {
		tab := generateOne(t, DesignLinearConstant, n, 0, seed)
		x := mat.NewDense(n, 5, nil)
		for i := range n {
			r := tab.X.RawRowView(i)
			x.SetRow(i, []float64{1, tab.W[i], r[0], r[1], r[2]})
		}
		y := mat.NewVecDense(n, tab.Y)
		var qr mat.QR
		qr.Factorize(x)
		var beta mat.VecDense
		if err := qr.SolveVecTo(&beta, false, y); err != nil {
			t.Fatal(err)
		}
		var res mat.VecDense
		res.MulVec(x, &beta)
		res.SubVec(y, &res)
		s2 := mat.Dot(&res, &res) / float64(n-5)
		var xtx, inv mat.Dense
		xtx.Mul(x.T(), x)
		if err := inv.Inverse(&xtx); err != nil {
			t.Fatal(err)
		}
		se := math.Sqrt(s2 * inv.At(1, 1))
		if got := beta.AtVec(1); math.Abs(got-2) > 4*se {
			t.Errorf("seed %d: OLS coefficient of w %.4f ± %.4f, want 2", seed, got, se)
		}
		if math.Abs(s2-1) > 0.15 {
			t.Errorf("seed %d: residual variance %.3f, want about 1", seed, s2)
		}
		// The true coefficients of age (per year), sex and score.
		for j, want := range []float64{linAge / ageSD, linSex, linScore} {
			if got, se := beta.AtVec(2+j), math.Sqrt(s2*inv.At(2+j, 2+j)); math.Abs(got-want) > 4*se {
				t.Errorf("seed %d: OLS coefficient of %s %.4f ± %.4f, want %v", seed, simpleCovariates[j], got, se, want)
			}
		}
		yt, yc := armMeans(tab.Y, tab.W)
		if naive := yt - yc; naive < 2+10*se {
			t.Errorf("seed %d: naive difference %.3f, want it clearly above 2 (confounded)", seed, naive)
		}
	}
}

func TestExactEffect(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ms := []float64{0, -1, -1 - 1e-16, -0.9999999999999999, -2, -3, 1e-300, -1e-300, 0.1, 1e15, -1e15, math.Nextafter(-1, 0)}
	for range 100000 {
		ms = append(ms, r.NormFloat64()*math.Pow(10, float64(r.IntN(12)-4)))
	}
	for _, m := range ms {
		mu0, mu1 := exactEffect(m, 2)
		if mu1-mu0 != 2 {
			t.Fatalf("exactEffect(%v, 2) = %v, %v: difference %v", m, mu0, mu1, mu1-mu0)
		}
		if math.Abs(mu0-m) > 2*math.Abs(m+2)*0x1p-53 {
			t.Fatalf("exactEffect(%v, 2): mu0 = %v, more than a rounding error away", m, mu0)
		}
	}
}

func TestSimpleErrors(t *testing.T) {
	valid := "paper, linear-constant, linear-varying, lognormal, binary, rough"
	for _, tc := range []struct {
		what string
		d    Design
		want string
	}{
		{"unknown design", Design{Name: "quadratic", Sources: 1, Rows: 10},
			`synth: invalid design: unknown design "quadratic"; want one of ` + valid},
		{"binary outcome", Design{Name: DesignLinearConstant, Sources: 1, Rows: 10, BinaryOutcome: true},
			"synth: invalid design: BinaryOutcome is a variant of the paper's design, not of design linear-constant; use design binary for a binary outcome"},
		{"proxies", Design{Name: DesignBinary, Sources: 1, Rows: 10, Proxies: 5},
			"synth: invalid design: 5 proxies: design binary has its own covariates (age, sex, score), want Proxies 0"},
		{"no rows", Design{Name: DesignLogNormal, Sources: 1},
			"synth: invalid design: 0 rows per source, want at least 1"},
		{"NaN Delta", Design{Name: DesignLogNormal, Sources: 1, Rows: 3, Delta: []float64{math.NaN()}},
			"synth: invalid design: Δ of source 1 is NaN"},
		{"overflow", Design{Name: DesignLogNormal, Sources: 2, Rows: 3, Delta: []float64{0, 1e4}},
			"synth: invalid design: design lognormal, source 2 with Δ = 10000: dataset: row 1, column 2 (y_factual): value +Inf"},
	} {
		src, err := Generate(tc.d)
		if err == nil || src != nil || !errors.Is(err, ErrDesign) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: Generate = %v, %v; want error %s", tc.what, src, err, tc.want)
		}
	}
	if got := strings.Join(DesignNames(), ", "); got != valid {
		t.Errorf("DesignNames = %s, want %s", got, valid)
	}
	DesignNames()[0] = "changed"
	if DesignNames()[0] != DesignPaper {
		t.Error("DesignNames returns the package's own slice")
	}

	for _, tc := range []struct {
		name  string
		delta float64
		want  string
	}{
		{"", 0, "depends on the seed"},
		{DesignPaper, 0, "depends on the seed"},
		{DesignRough, 0, "depends on the seed"},
		{"quadratic", 0, `unknown design "quadratic"; want one of ` + valid},
		{DesignLinearVarying, math.Inf(1), "Δ is +Inf"},
		{DesignLogNormal, 1e4, "ATE of design lognormal at Δ = 10000 is +Inf"},
	} {
		if ate, err := PopulationATE(tc.name, tc.delta); !errors.Is(err, ErrDesign) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("PopulationATE(%q, %v) = %v, %v; want an error containing %q", tc.name, tc.delta, ate, err, tc.want)
		}
	}
}

func TestDesignCovariates(t *testing.T) {
	for _, tc := range []struct {
		d    Design
		want string
	}{
		{Design{}, "x1 x2 x3 x4 x5 x6 x7 x8 x9 x10 x11 x12 x13 x14 x15 x16 x17 x18 x19 x20 x21 x22 x23 x24 x25 x26 x27 x28 x29 x30"},
		{Design{Name: DesignPaper, Proxies: 3}, "x1 x2 x3"},
		{Design{Name: DesignLinearConstant}, "age sex score"},
		{Design{Name: DesignBinary}, "age sex score"},
		{Design{Name: "other"}, ""},
		{Design{Proxies: -1}, ""},
	} {
		if got := strings.Join(tc.d.Covariates(), " "); got != tc.want {
			t.Errorf("%+v: Covariates = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// TestRoughPath checks that the rough design's function is a Matérn-½
// path: unit variance, and mean squared increments 2(1 − e^(−h/ℓ)), which
// grow linearly in small h (a smooth path's grow as h²).
func TestRoughPath(t *testing.T) {
	var v, inc1, inc4 float64
	var n float64
	const h = 0.01
	for seed := range uint64(20) {
		r := roughPath(rand.NewPCG(seed, 1))
		for i := range 200 {
			u := -2 + 4*float64(i)/200
			a := r(u)
			v += a * a
			inc1 += (r(u+h) - a) * (r(u+h) - a)
			inc4 += (r(u+4*h) - a) * (r(u+4*h) - a)
			n++
		}
	}
	v, inc1, inc4 = v/n, inc1/n, inc4/n
	want1 := 2 * (1 - math.Exp(-h/roughLength))
	if math.Abs(v-1) > 0.25 || math.Abs(inc1/want1-1) > 0.25 {
		t.Errorf("variance %.3f (want 1), mean squared increment at h = %v %.4f (want %.4f)", v, h, inc1, want1)
	}
	if ratio := inc4 / inc1; ratio < 3 || ratio > 5 {
		t.Errorf("increments at 4h are %.2f times those at h; want about 3.8 for a Matérn-½ path (16 for a smooth one)", ratio)
	}
}
