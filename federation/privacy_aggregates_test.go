package federation

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	gfloats "gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/stat"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/glm"
	"github.com/crffd/crffd/inference"
)

// testBounds and testOutcomeBound are public ranges of the continuous
// columns of makeData (c1 ~ N(s, 1), c2 ~ 3·N(0, 1)) and of its outcome.
var (
	testBounds       = map[string]Bound{"c1": {-5, 8}, "C2": {-10, 10}} // C2: bounds match names whatever their case
	testOutcomeBound = Bound{-10, 15}
)

// plant puts extreme values in some rows of d: far outside every bound,
// so that a release that did not clip them would move by more than its
// sensitivity when they are removed.
func plant(d *estimator.Data, rows ...int) {
	for k, i := range rows {
		sign := float64(1 - 2*(k%2))
		d.X.Set(i, 1, sign*1e6)
		d.X.Set(i, 3, -sign*3e4)
		d.Y[i] = sign * 5e5
	}
}

// withoutRow returns d without row i.
func withoutRow(d *estimator.Data, i int) *estimator.Data {
	keep := make([]int, 0, d.Rows()-1)
	for j := range d.Rows() {
		if j != i {
			keep = append(keep, j)
		}
	}
	return d.Subset(keep)
}

// TestMomentsSensitivityOnNeighbours computes the clipped, normalised
// moments that a private hello noises on a dataset D and on D minus each
// of its rows in turn (add/remove), and checks that the L2 distance never
// exceeds the sensitivity the noise is calibrated to, √(2k) over k
// columns, on datasets with values far outside the bounds; and that the
// bound is attained when a removed row sits at a corner of the bounds, so
// that it is not loose. Without the clipping the planted rows move the
// sums by about 10⁶ and the test fails.
func TestMomentsSensitivityOnNeighbours(t *testing.T) {
	for _, tc := range []struct {
		name    string
		outcome Bound
		planted []int
		cols    int  // columns released: c1, c2, the outcome, and its log when the bound is positive
		tight   bool // a removed row attains the sensitivity
	}{
		{"inside the bounds", testOutcomeBound, nil, 3, false},
		{"values far outside", testOutcomeBound, []int{0, 7, 19}, 3, true},
		{"positive outcome bound: log moments too", Bound{0.5, 40}, []int{3, 4}, 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := makeData(60, 1)
			plant(d, tc.planted...)
			p := &SitePrivacy{Bounds: testBounds, Outcome: &tc.outcome}
			cols, missing := p.momentColumns(testColumns, testSchema)
			if len(cols) != tc.cols || len(missing) != 0 {
				t.Fatalf("%d columns released (%v missing), want %d", len(cols), missing, tc.cols)
			}
			sens := momentSensitivity(len(cols))
			full, _ := normalisedMoments(d, cols)
			worst := 0.0
			for i := range d.Rows() {
				less, _ := normalisedMoments(withoutRow(d, i), cols)
				dist := gfloats.Distance(full, less, 2)
				if dist > sens*(1+1e-12) {
					t.Errorf("removing row %d moves the moments by %v, past the sensitivity %v", i, dist, sens)
				}
				worst = max(worst, dist)
			}
			if tc.tight && worst < sens*(1-1e-9) {
				t.Errorf("the largest move %v of a row at the bounds' corner is below the sensitivity %v: the noise is larger than it needs to be", worst, sens)
			}
			t.Logf("largest move %.4g of sensitivity %.4g", worst, sens)
		})
	}
}

// TestATESensitivityOnNeighbours does the same for the ATE's three sums:
// removing any one row moves Σψ by at most B, Σψ² by at most B² and Σ τ̂
// by at most R, on scores and CATEs far outside the bounds.
func TestATESensitivityOnNeighbours(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		name    string
		b, cate float64
		planted map[int]float64
	}{
		{"within the bounds", 50, 25, nil},
		{"scores and effects far outside", 50, 25, map[int]float64{2: 1e7, 9: -3e6, 30: 51}},
		{"tight clip", 0.5, 0.25, map[int]float64{5: 1e4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			psi, cate := make([]float64, 40), make([]float64, 40)
			for i := range psi {
				psi[i], cate[i] = 2+3*r.NormFloat64(), 2+r.NormFloat64()
			}
			for i, v := range tc.planted {
				psi[i], cate[i] = v, -v
			}
			full, _, _ := clippedATESums(psi, cate, tc.b, tc.cate)
			sens := ateSensitivities(tc.b, tc.cate)
			for i := range psi {
				less, _, _ := clippedATESums(slices.Delete(slices.Clone(psi), i, i+1), slices.Delete(slices.Clone(cate), i, i+1), tc.b, tc.cate)
				for k := range full {
					if d := math.Abs(full[k] - less[k]); d > sens[k]*(1+1e-12) {
						t.Errorf("removing row %d moves sum %d by %v, past its sensitivity %v", i, k, d, sens[k])
					}
				}
			}
		})
	}
}

// TestAggregateNoiseIsAdded releases the same rows many times: the
// releases differ, and the spread of each noised sum over the releases
// matches σ times its sensitivity, which the release reports; binary
// columns are not released (zeros).
func TestAggregateNoiseIsAdded(t *testing.T) {
	const sigma, draws = 2.0, 3000
	r := rand.New(rand.NewPCG(5, 6))
	p := &SitePrivacy{Bounds: testBounds, Outcome: &testOutcomeBound}
	d := makeData(2000, 0)

	t.Run("moments", func(t *testing.T) {
		cols, _ := p.momentColumns(testColumns, testSchema)
		sums := make([][]float64, len(testColumns)+1)
		var first estimator.Moments
		for k := range draws {
			mo, err := p.Moments(d, testColumns, testSchema, sigma, r)
			if err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				first = mo
			} else if k == 1 && slices.Equal(mo.Sum, first.Sum) {
				t.Fatal("two releases of the moments are equal: no noise")
			}
			for j := range sums {
				sums[j] = append(sums[j], mo.Sum[j])
			}
			if mo.Sum[0] != 0 || mo.SumSq[0] != 0 || mo.Sum[2] != 0 || mo.SumSq[2] != 0 || mo.N != d.Rows() {
				t.Fatalf("binary columns released as %v, %v over %d rows", mo.Sum, mo.SumSq, mo.N)
			}
		}
		// Σx = n·c + h·Σt: the noise on Σt, σ·√(2k), scaled by h.
		for _, c := range cols {
			h := (c.bound.Hi - c.bound.Lo) / 2
			want := sigma * momentSensitivity(len(cols)) * h
			if got := stat.StdDev(sums[c.index], nil); math.Abs(got/want-1) > 0.06 {
				t.Errorf("%s: the noise on Σx has sd %.4g, want σ·√(2k)·h = %.4g", c.name, got, want)
			}
		}
	})

	t.Run("ATE sums", func(t *testing.T) {
		psi, cate := make([]float64, 500), make([]float64, 500)
		for i := range psi {
			psi[i], cate[i] = 2+4*r.NormFloat64(), 2+r.NormFloat64()
		}
		const ysd = 2 // 8 sds, 16, are within the cap of 2 × 25
		b, rr := p.ateClips(testSchema, ysd)
		if b != DefaultPsiClipSDs*ysd || rr != 25 {
			t.Fatalf("clips %v and %v, want %v and 25", b, rr, DefaultPsiClipSDs*ysd)
		}
		// Each sum's noise: σ/√share times its sensitivity.
		sd := [3]float64{sigma * b / math.Sqrt(ATEShares[0]), sigma * b * b / math.Sqrt(ATEShares[1]), sigma * rr / math.Sqrt(ATEShares[2])}
		var s1, s2, tau []float64
		for range draws {
			rel, err := p.ATE(psi, cate, testSchema, ysd, sigma, r)
			if err != nil {
				t.Fatal(err)
			}
			s1, s2, tau = append(s1, rel.Sums.Sum), append(s2, rel.Sums.SumSq), append(tau, rel.PlugIn*float64(len(cate)))
			if rel.NoiseSD != sd || rel.Sums.NoiseVar != sd[0]*sd[0] || rel.Sums.N != len(psi) {
				t.Fatalf("release reports noise %v, variance %v over %d rows", rel.NoiseSD, rel.Sums.NoiseVar, rel.Sums.N)
			}
		}
		if s1[0] == s1[1] {
			t.Fatal("two releases of Σψ are equal: no noise")
		}
		for _, c := range []struct {
			name string
			v    []float64
			want float64
		}{{"Σψ", s1, sd[0]}, {"Σψ²", s2, sd[1]}, {"Σ τ̂", tau, sd[2]}} {
			if got := stat.StdDev(c.v, nil); math.Abs(got/c.want-1) > 0.06 {
				t.Errorf("%s: noise sd %.4g, want %.4g", c.name, got, c.want)
			}
		}
	})
}

// TestPrivateColumnsNeedBounds: a private site needs a public bound for
// every continuous column and a continuous outcome, unless privacy.exact
// names the aggregates that would use them; the error names every one
// missing. A bound that is not a range, and a negative psi_clip, are
// refused too.
func TestPrivateColumnsNeedBounds(t *testing.T) {
	binaryOutcome := estimator.Schema{Binary: testSchema.Binary, BinaryOutcome: true}
	for _, tc := range []struct {
		name   string
		p      SitePrivacy
		schema estimator.Schema
		err    string // "" for none
	}{
		{"none", SitePrivacy{}, testSchema, "no public bound (privacy.bounds) for c1, c2, the outcome:"},
		{"one covariate", SitePrivacy{Bounds: map[string]Bound{"c1": {0, 1}}}, testSchema, "for c2, the outcome:"},
		{"covariates, not the outcome", SitePrivacy{Bounds: testBounds}, testSchema, "for the outcome:"},
		{"binary outcome needs none", SitePrivacy{Bounds: testBounds}, binaryOutcome, ""},
		{"all", SitePrivacy{Bounds: testBounds, Outcome: &testOutcomeBound}, testSchema, ""},
		{"moments exact, psi_clip set", SitePrivacy{Exact: []string{ExactRowCount, ExactMoments}, PsiClip: 10}, testSchema, ""},
		{"moments exact, the ATE's clip needs the outcome", SitePrivacy{Exact: []string{ExactRowCount, ExactMoments}}, testSchema, "for the outcome:"},
		{"moments and ate exact", SitePrivacy{Exact: []string{ExactRowCount, ExactMoments, ExactATE}}, testSchema, ""},
		{"empty bound", SitePrivacy{Bounds: map[string]Bound{"c1": {1, 1}}}, testSchema, "the bound [1, 1] of column c1 must be finite, with lo < hi"},
		{"infinite outcome bound", SitePrivacy{Outcome: &Bound{0, math.Inf(1)}}, testSchema, "of column the outcome must be finite"},
		{"negative psi_clip", SitePrivacy{Bounds: testBounds, Outcome: &testOutcomeBound, PsiClip: -1}, testSchema, "psi_clip -1 must be finite and not negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.CheckColumns(testColumns, tc.schema)
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("%v, want no error", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("%v, want an error saying %q", err, tc.err)
			}
		})
	}
}

// TestPrivateSiteWithoutBoundsRefusesTheRun: the site tells the
// coordinator it refuses (ErrLimit) before it charges its budget or sends
// anything computed from its rows, and its error names the columns.
func TestPrivateSiteWithoutBoundsRefusesTheRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := testConfig()
	cfg.Method = estimator.Adam
	f := newFed(40, 40)
	ledger := &memoryLedger{}
	f.cfgs[0].Privacy = &SitePrivacy{Epsilon: 1, Delta: 1e-5, Clip: 1, Ledger: ledger, Bounds: map[string]Bound{"c2": {-10, 10}}}
	sent := f.recordSent("site1")
	sites := f.start(ctx)
	if _, err := RunCoordinator(ctx, f.coordinator(cfg), f.net.Endpoint("coord")); !errors.Is(err, ErrSiteRefused) {
		t.Errorf("coordinator: %v, want ErrSiteRefused", err)
	}
	if r := <-sites[0]; !errors.Is(r.err, ErrLimit) || !strings.Contains(r.err.Error(), "for c1, the outcome:") {
		t.Errorf("site1: %v, want ErrLimit naming c1 and the outcome", r.err)
	}
	<-sites[1]
	if env := sent.envelopes(); len(env) != 1 {
		t.Errorf("site1 sent %d envelopes, want its refusal alone", len(env))
	} else {
		checkRefusal(t, env[0], refusalLimit)
	}
	if len(ledger.charges) != 0 {
		t.Errorf("the refused run was charged: %+v", ledger.charges)
	}
}

// TestPrivateSitesNoiseTheirAggregates runs a federation of two private
// sites and one that is not, twice over the same rows. What the private
// sites send of their moments and ATE sums differs between the runs
// (noise is added); the binary columns' sums are zeros; each private ate
// carries the standard deviations of its noise, σ times the clip bounds;
// and the global AIPW standard error includes them:
// se² = sd(ψ)²/N + Σ sd_s²/N². Each private site keeps its exact local
// ATE, and the rows its clipping changed.
func TestPrivateSitesNoiseTheirAggregates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := testConfig()
	cfg.Method = estimator.Adam
	type sent struct {
		moments []float64
		ate     map[string][]float64
	}
	run := func(id string) (*Result, []*SiteResult, []sent, []float64) {
		f := newFed(60, 60, 60)
		for s := range 2 {
			f.cfgs[s].Privacy = &SitePrivacy{Epsilon: 4, Delta: 1e-5, Clip: 1, Bounds: testBounds, Outcome: &testOutcomeBound}
		}
		var out [3]sent
		f.net.Intercept = func(b []byte) [][]byte {
			e, _ := wire.Unmarshal(b)
			if e == nil {
				return [][]byte{b}
			}
			s := slices.Index(f.names, e.Sender)
			switch {
			case s < 0:
			case e.Kind == wire.KindHello:
				if t, ok := e.Tensor(tMomentsSum); ok {
					out[s].moments = slices.Clone(t.Values)
				}
			case e.Kind == wire.KindATE:
				out[s].ate = map[string][]float64{}
				for _, t := range e.Tensors() {
					out[s].ate[t.Name] = slices.Clone(t.Values)
				}
			}
			return [][]byte{b}
		}
		sites := f.start(ctx)
		c := f.coordinator(cfg)
		c.RunID = id
		res, err := RunCoordinator(ctx, c, f.net.Endpoint("coord"))
		if err != nil {
			t.Fatal(err)
		}
		exact := f.data[2].Moments().Sum
		return res, waitSites(t, sites), out[:], exact
	}
	res1, sites1, sent1, exact := run("run-1")
	_, _, sent2, _ := run("run-2")
	for s := range 3 {
		private := s < 2
		if got := !slices.Equal(sent1[s].moments, sent2[s].moments); got != private {
			t.Errorf("site%d: moments of two runs differ %v, want %v", s+1, got, private)
		}
		// (The private sites' noise moves every site's models and scores,
		// through the scaler; what differs here is the release itself.)
		if private && sent1[s].ate[tAIPWSum][0] == sent2[s].ate[tAIPWSum][0] {
			t.Errorf("site%d: Σψ of two runs are equal: no noise", s+1)
		}
		if l := sites1[s].Local.AIPW; !private && math.Abs(sent1[s].ate[tAIPWSum][0]-l.Estimate*float64(l.N)) > 1e-9*float64(l.N) {
			t.Errorf("site%d, not private: sent Σψ = %v, its exact local ATE %v over %d rows", s+1, sent1[s].ate[tAIPWSum][0], l.Estimate, l.N)
		}
		_, noised := sent1[s].ate[tATENoise]
		if noised != private {
			t.Errorf("site%d: ate carries %s %v, want %v", s+1, tATENoise, noised, private)
		}
	}
	if !slices.Equal(sent1[2].moments, exact) {
		t.Errorf("site3, not private, sent moments %v, want its exact %v", sent1[2].moments, exact)
	}
	if m := sent1[0].moments; m[0] != 0 || m[2] != 0 {
		t.Errorf("site1 sent binary columns' sums %v, want zeros", m)
	}
	var noiseVar float64
	for s := range 2 {
		r := sites1[s].Released
		if r == nil {
			t.Fatalf("site%d keeps no release", s+1)
		}
		sd := sent1[s].ate[tATENoise]
		b := r.PsiClip
		if want := min(DefaultPsiClipSDs*sites1[s].Setup.Scaler.YSD, DefaultPsiClipRanges*(testOutcomeBound.Hi-testOutcomeBound.Lo)); b != want {
			t.Errorf("site%d: ψ clipped to %v, want %v", s+1, b, want)
		}
		f := ATEShares
		if len(sd) != 3 || sd[0] != r.NoiseSD[0] || math.Abs(sd[1]/sd[0]-b*math.Sqrt(f[0]/f[1])) > 1e-9 || math.Abs(sd[0]/sd[2]-b/25*math.Sqrt(f[2]/f[0])) > 1e-9 {
			t.Errorf("site%d: noise sds %v, want σ·[B/√f0, B²/√f1, R/√f2] with B = %v, R = 25", s+1, sd, b)
		}
		noiseVar += sd[0] * sd[0]
		if sites1[s].Local.AIPW.NoiseSE != 0 {
			t.Errorf("site%d: local AIPW carries noise se %v; a site's own ATE is exact", s+1, sites1[s].Local.AIPW.NoiseSE)
		}
		if got := res1.LocalAIPW[s].NoiseVar; got != sd[0]*sd[0] {
			t.Errorf("coordinator: site%d's noise variance %v, want %v", s+1, got, sd[0]*sd[0])
		}
	}
	// The stratified variance, each site's noise variance taken out of
	// its squared noised sum.
	var total inference.Sums
	var within float64
	for _, a := range res1.LocalAIPW {
		total = total.Add(a)
		within += a.SumSq - (a.Sum*a.Sum-a.NoiseVar)/float64(a.N)
	}
	n := float64(total.N)
	sampling := within / (n * (n - float64(len(res1.LocalAIPW))))
	g := res1.GlobalAIPW
	if want := math.Sqrt(sampling + noiseVar/(n*n)); math.Abs(g.SE-want) > 1e-9*want || math.Abs(g.NoiseSE-math.Sqrt(noiseVar)/n) > 1e-12 {
		t.Errorf("global se %v (noise %v), want %v (noise %v)", g.SE, g.NoiseSE, want, math.Sqrt(noiseVar)/n)
	}
	for s, r := range sites1 {
		if r.Global.AIPW.SE != g.SE || r.Global.AIPW.NoiseSE != g.NoiseSE {
			t.Errorf("site%d: global se %v (noise %v), want the coordinator's %v (%v)", s+1, r.Global.AIPW.SE, r.Global.AIPW.NoiseSE, g.SE, g.NoiseSE)
		}
	}
}

// TestNoisedSumsOnTheWire: a coordinator refuses noise it cannot use, and
// a site refuses a global noise se beyond the se.
func TestNoisedSumsOnTheWire(t *testing.T) {
	ate := func(ts ...wire.Tensor) *wire.Envelope {
		e, err := wire.New(wire.Header{RunID: "r", Kind: wire.KindATE, Sender: "site1", Recipient: "coord"},
			append([]wire.Tensor{wire.Scalar(tATE, 1), wire.Scalar(tN, 10), wire.Scalar(tAIPWSum, 10), wire.Scalar(tAIPWSumSq, 20), wire.Scalar(tClipped, 0)}, ts...))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	for _, tc := range []struct {
		name string
		e    *wire.Envelope
		err  string
		v    float64 // the noise variance read
	}{
		{"exact", ate(), "", 0},
		{"noised", ate(wire.Vector(tATENoise, []float64{3, 30, 2})), "", 9},
		{"negative sd", ate(wire.Vector(tATENoise, []float64{3, -1, 2})), "noise standard deviation -1", 0},
		{"two sds", ate(wire.Vector(tATENoise, []float64{3, 1})), `tensor "ate.noise" has 2 values, want 3`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, sums, _, err := decodeLocal(tc.e)
			switch {
			case tc.err == "" && (err != nil || sums.NoiseVar != tc.v):
				t.Errorf("%v, noise variance %v; want %v", err, sums.NoiseVar, tc.v)
			case tc.err != "" && (!errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("%v, want ErrProtocol saying %q", err, tc.err)
			}
		})
	}
	est, err := inference.Sums{N: 10, Sum: 10, SumSq: 20, NoiseVar: 9}.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		noiseSE float64
		err     bool
	}{{"noise se", est.NoiseSE, false}, {"noise se beyond the se", est.SE * 1.1, true}, {"negative", -0.1, true}} {
		t.Run("global "+tc.name, func(t *testing.T) {
			g := globalTensors(inference.ATEs{AIPW: est, PlugIn: inference.PointEstimate(1, 10)})
			for i := range g {
				if g[i].Name == tAIPWNoiseSE {
					g[i] = wire.Scalar(tAIPWNoiseSE, tc.noiseSE)
				}
			}
			e, err := wire.New(wire.Header{RunID: "r", Kind: wire.KindGlobalATE, Sender: "coord", Recipient: "site1"}, g)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeGlobal(e)
			switch {
			case !tc.err && (err != nil || got.AIPW.NoiseSE != tc.noiseSE):
				t.Errorf("%v, noise se %v; want %v", err, got.AIPW.NoiseSE, tc.noiseSE)
			case tc.err && (!errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "noise se")):
				t.Errorf("%v, want ErrProtocol about the noise se", err)
			}
		})
	}
}

// TestReleaseErrors: what the release functions refuse.
func TestReleaseErrors(t *testing.T) {
	p := &SitePrivacy{Exact: []string{ExactRowCount, ExactMoments}}
	r := rand.New(rand.NewPCG(1, 2))
	if _, err := p.ATE([]float64{1, 2}, []float64{1}, testSchema, 0, 1, r); err == nil || !strings.Contains(err.Error(), "2 scores and 1 CATEs") {
		t.Errorf("mismatched scores and CATEs: %v", err)
	}
	if _, err := p.ATE([]float64{1, 2}, []float64{1, 2}, testSchema, 0, 1, r); err == nil || !strings.Contains(err.Error(), "no clip bound for the ATE's sums") {
		t.Errorf("no clip bound: %v", err)
	}
	p.PsiClip = 3
	if _, err := p.ATE([]float64{1, 2}, []float64{1, 2}, testSchema, 0, 0, r); err == nil || !strings.Contains(err.Error(), "noise multiplier 0") {
		t.Errorf("no noise: %v", err)
	}
	if _, err := (&SitePrivacy{}).Moments(makeData(10, 0), testColumns, testSchema, 1, r); err == nil || !strings.Contains(err.Error(), "no public bound") {
		t.Errorf("moments without bounds: %v", err)
	}
	s := &site{cfg: SiteConfig{Privacy: &SitePrivacy{Bounds: testBounds, Outcome: &testOutcomeBound}, Schema: testSchema}}
	if _, err := s.ateTensors(0, inference.Sums{N: 2}, 0, []float64{1, 2}, []float64{1, 2}); err == nil || !strings.Contains(err.Error(), "were not charged") {
		t.Errorf("uncharged ATE release: %v", err)
	}
}

// TestCalibrateSharesTheSiteRules: the noise Calibrate returns (what crffd
// eval uses) is the noise a site daemon charges for the same run, and the
// run spends its ε.
func TestCalibrateSharesTheSiteRules(t *testing.T) {
	cfg := testConfig()
	cfg.Method, cfg.BatchSize, cfg.Rounds = estimator.Adam, 64, 50
	p := SitePrivacy{Epsilon: 4, RunEpsilon: 2, Delta: 1e-5, Clip: 1, Bounds: testBounds, Outcome: &testOutcomeBound}
	got, err := p.Calibrate(cfg, 400, 400, testColumns, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	s := &site{cfg: SiteConfig{Privacy: &p, Data: makeData(400, 0), Schema: testSchema, Columns: testColumns}, log: slog.New(slog.DiscardHandler)}
	if err := s.chargePrivacy(context.Background(), "r", cfg, nil); err != nil {
		t.Fatal(err)
	}
	if got.Rate != 64.0/400 || got.Rate != s.charge.q || got.Training != s.charge.noise || got.Moments != s.charge.aggregate(StepMoments) || got.Nuisance != s.charge.aggregate(StepNuisance) || got.ATE != s.charge.aggregate(StepATE) || got.Rounds != s.charge.rounds {
		t.Errorf("Calibrate %+v, the site charged %+v", got, *s.charge)
	}
	if !(got.Epsilon <= 2 && got.Epsilon > 1.98) {
		t.Errorf("the run spends ε = %v, want just under 2", got.Epsilon)
	}
	exact, noised, withheld := p.Aggregates()
	if !slices.Equal(exact, []string{ExactRowCount}) || !slices.Equal(noised, []string{ExactMoments, ExactATE}) || !slices.Equal(withheld, []string{ExactSelection, ExactBalance}) {
		t.Errorf("aggregates exact %v, noised %v, withheld %v", exact, noised, withheld)
	}
}

// TestRecheckNoisedATE: a private site that rejoins after the local ATEs
// are in sends its sums again with fresh noise (it is charged again), so
// the coordinator compares only the row count and the noise, and keeps
// the recorded sums either way; an exact site's sums must match.
func TestRecheckNoisedATE(t *testing.T) {
	recorded := inference.Sums{N: 10, Sum: 12, SumSq: 40, NoiseVar: 9}
	ate := func(n, sum float64, sd []float64) *wire.Envelope {
		ts := []wire.Tensor{wire.Scalar(tATE, 1), wire.Scalar(tN, n), wire.Scalar(tAIPWSum, sum), wire.Scalar(tAIPWSumSq, 40), wire.Scalar(tClipped, 0)}
		if sd != nil {
			ts = append(ts, wire.Vector(tATENoise, sd))
		}
		e, err := wire.New(wire.Header{RunID: "r", Kind: wire.KindATE, Sender: "site1", Recipient: "coord"}, ts)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	for _, tc := range []struct {
		name     string
		recorded inference.Sums
		e        *wire.Envelope
		want     string
	}{
		{"fresh noise", recorded, ate(10, 15, []float64{3, 30, 2}), "rejoined private site's row count and noise match"},
		{"another row count", recorded, ate(11, 15, []float64{3, 30, 2}), "rejoined private site's row count or noise differs"},
		{"exact, the same", inference.Sums{N: 10, Sum: 12, SumSq: 40}, ate(10, 12, nil), "rejoined site's local ATE matches"},
		{"exact, other sums", inference.Sums{N: 10, Sum: 12, SumSq: 40}, ate(10, 15, nil), "rejoined site's local ATE differs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs logBuffer
			c := &coordinator{cfg: CoordinatorConfig{Sites: []string{"site1"}}, log: slog.New(slog.NewTextHandler(&logs, nil)),
				st: &State{Finish: &FinishState{LocalATE: []float64{1}, AIPW: []inference.Sums{tc.recorded}, Clipped: []int{0}, Done: []bool{false}}}}
			c.recheckATE(0, tc.e)
			if !strings.Contains(logs.String(), tc.want) {
				t.Errorf("log %q, want %q", logs.String(), tc.want)
			}
			if c.st.Finish.AIPW[0] != tc.recorded {
				t.Errorf("recorded sums changed to %+v", c.st.Finish.AIPW[0])
			}
		})
	}
}

// TestPrivateATEIntervalCovers: the interval a private site's released ATE
// sums give, whose standard error includes the noise's variance, covers
// the true mean of the scores at its nominal 95%, where an interval of the
// sampling error alone would not; the noise is large against it here.
func TestPrivateATEIntervalCovers(t *testing.T) {
	const (
		reps, n = 1000, 400
		truth   = 2.0
		ysd     = 2 // ψ clipped to 8·2 = 16, beyond almost every score
		sigma   = 20
	)
	p := SitePrivacy{Epsilon: 4, Delta: 1e-5, Clip: 1, Bounds: testBounds, Outcome: &testOutcomeBound}
	r := rand.New(rand.NewPCG(11, 12))
	var covered, coveredSampling int
	psi, cate := make([]float64, n), make([]float64, n)
	for range reps {
		for i := range psi {
			psi[i], cate[i] = truth+3*r.NormFloat64(), truth
		}
		rel, err := p.ATE(psi, cate, testSchema, ysd, sigma, r)
		if err != nil {
			t.Fatal(err)
		}
		e, err := rel.Sums.Estimate()
		if err != nil {
			t.Fatal(err)
		}
		if e.Lower <= truth && truth <= e.Upper {
			covered++
		}
		sampling := math.Sqrt(max(0, e.SE*e.SE-rel.Sums.NoiseVar/(n*n)))
		if math.Abs(e.Estimate-truth) <= 1.96*sampling {
			coveredSampling++
		}
	}
	if c := float64(covered) / reps; c < 0.93 || c > 0.97 {
		t.Errorf("the noise-inclusive interval covers %.3f of %d releases, want 0.95 ± 0.02", c, reps)
	}
	if c := float64(coveredSampling) / reps; c > 0.85 {
		t.Errorf("an interval of the sampling error alone covers %.3f: the noise is too small for this test to tell", c)
	}
	t.Logf("coverage %.3f with the noise in the se, %.3f without", float64(covered)/reps, float64(coveredSampling)/reps)
}

// TestCalibrateRefusesASharelessRelease: a release without a share of
// the aggregate budget is a programming error, refused rather than given
// infinite noise.
func TestCalibrateRefusesASharelessRelease(t *testing.T) {
	cfg := testConfig()
	p := SitePrivacy{Epsilon: 4, Delta: 1e-5, Clip: 1}
	if _, _, err := calibrateRun(&p, "r", cfg, 400, nil, []release{{step: StepATE, count: 1}}); err == nil || !strings.Contains(err.Error(), "release ate has share 0") {
		t.Fatalf("err %v, want the release named with its share", err)
	}
}

// TestPrivateATEScoresOnNeighbours: the ψ of a site that releases its
// ATE's sums with noise depend on their own row and on the noised release
// of the nuisance statistics alone. Removing a row moves those statistics
// by at most glm.Sensitivity (checked here on rows whose values pass
// their bounds), and, for a given release, leaves every other row's ψ as
// it was, so that the clipped Σψ moves by at most B. Cross-fitted ψ, which
// a site without privacy uses, fail that: every row trains fold models
// that predict the others, and the check below sees it.
func TestPrivateATEScoresOnNeighbours(t *testing.T) {
	ctx := context.Background()
	d := makeData(120, 0)
	d.X.Set(3, 0, 1e6) // far outside the run's scale: clipped
	d.Y[5] = -1e6      // far outside the outcome's bound
	m, err := estimator.Fit(ctx, []*estimator.Data{d}, testSchema, estimator.GaussianSpectral{}, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	p := &SitePrivacy{Epsilon: 4, Delta: 1e-5, Clip: 1, Bounds: testBounds, Outcome: &testOutcomeBound}
	const b, sigma = 50.0, 2.0
	for _, removed := range []int{3, 5, 7} {
		var keep []int
		for i := range d.Rows() {
			if i != removed {
				keep = append(keep, i)
			}
		}
		less := d.Subset(keep)
		// The statistics' sensitivity on this pair.
		sFull, err := m.Setup.NuisanceStats(d)
		if err != nil {
			t.Fatal(err)
		}
		sLess, err := m.Setup.NuisanceStats(less)
		if err != nil {
			t.Fatal(err)
		}
		diff := sFull.Vector()
		gfloats.Sub(diff, sLess.Vector())
		if got, bound := gfloats.Norm(diff, 2), glm.Sensitivity(sFull.D); got > bound {
			t.Errorf("removing row %d moved the nuisance statistics by %v, past their sensitivity %v", removed, got, bound)
		}
		// One release of D's statistics, as both datasets' models see it.
		released := sFull.Vector()
		r := rand.New(rand.NewPCG(uint64(removed), 1))
		for i := range released {
			released[i] += sigma * glm.Sensitivity(sFull.D) * r.NormFloat64()
		}
		for _, private := range []bool{true, false} {
			psi := func(data *estimator.Data) []float64 {
				t.Helper()
				var nu inference.Nuisance
				var err error
				if private {
					nu, err = fitPrivateNuisance(p, m.Setup, data, sigma, func(v []float64, _ float64) error {
						copy(v, released)
						return nil
					})
				} else {
					nu, err = estimator.CrossFit(ctx, m.Setup, 0, data)
				}
				if err != nil {
					t.Fatal(err)
				}
				ps, _, err := inference.Scores(data.W, data.Y, nu, inference.DefaultClip)
				if err != nil {
					t.Fatal(err)
				}
				return ps
			}
			full, fewer := psi(d), psi(less)
			moved := 0
			for i := range fewer {
				j := i
				if i >= removed {
					j++
				}
				if full[j] != fewer[i] {
					moved++
				}
			}
			sumFull, _, _ := clippedATESums(full, make([]float64, len(full)), b, 1)
			sumLess, _, _ := clippedATESums(fewer, make([]float64, len(fewer)), b, 1)
			switch {
			case private && (moved > 0 || math.Abs(sumFull[0]-sumLess[0]) > b*(1+1e-12)):
				t.Errorf("private: removing row %d moved %d other rows' ψ and Σψ by %v (B = %v)", removed, moved, math.Abs(sumFull[0]-sumLess[0]), b)
			case !private && moved < 50:
				t.Errorf("cross-fitted: removing row %d moved only %d other rows' ψ; the check would not see the bound fail", removed, moved)
			}
		}
	}
}

// TestNuisanceNeedsRows: a site whose noise on the nuisance statistics
// would leave fewer than NuisanceRowsPerNoise rows per unit of it drops
// the step (and takes its DP-trained models' nuisances); a large one
// charges it.
func TestNuisanceNeedsRows(t *testing.T) {
	cfg := testConfig()
	cfg.Method = estimator.Adam
	p := SitePrivacy{Epsilon: 4, Delta: 1e-5, Clip: 1, Bounds: testBounds, Outcome: &testOutcomeBound, NuisanceStatistics: true}
	d := len(testSchema.Binary)
	for _, tc := range []struct {
		rows int
		step bool
	}{{100, false}, {1_000_000, true}} {
		rc, charges, err := calibrateNuisance(&p, "r", cfg, tc.rows, tc.rows, d, nil, aggregateReleasesOf(&p, testColumns, testSchema))
		if err != nil {
			t.Fatal(err)
		}
		charged := slices.ContainsFunc(charges, func(c Charge) bool { return c.Step == StepNuisance })
		off := p
		off.NuisanceStatistics = false
		if _, c, err := calibrateNuisance(&off, "r", cfg, tc.rows, tc.rows, d, nil, aggregateReleasesOf(&off, testColumns, testSchema)); err != nil ||
			slices.ContainsFunc(c, func(c Charge) bool { return c.Step == StepNuisance }) {
			t.Errorf("%d rows, nuisance_statistics off: charged the step (%v)", tc.rows, err)
		}
		if sigma := rc.aggregate(StepNuisance); charged != tc.step || (sigma > 0) != tc.step {
			t.Errorf("%d rows: nuisance charged %v at σ %v, want %v", tc.rows, charged, sigma, tc.step)
		}
		if !tc.step {
			continue
		}
		if rc.aggregate(StepNuisance)*glm.Sensitivity(d)*NuisanceRowsPerNoise > float64(tc.rows) {
			t.Errorf("%d rows: charged the nuisance step at σ %v, past the rule", tc.rows, rc.aggregate(StepNuisance))
		}
		if r := rc.aggregate(StepNuisance) / rc.aggregate(StepATE); math.Abs(r-math.Sqrt(float64(ShareATE)/ShareNuisance)) > 1e-9 {
			t.Errorf("the nuisance statistics' noise over the ATE's is %v, want √(%v/%v)", r, ShareATE, ShareNuisance)
		}
	}
}
