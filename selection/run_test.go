package selection

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/estimator"
)

// narrow is the Gaussian kernel at a third of the unit lengthscale: a
// second kernel for the tests.
type narrow struct{}

func (narrow) Sample(ctx context.Context, d, D int, seed uint64) (*mat.Dense, error) {
	m, err := estimator.GaussianSpectral{}.Sample(ctx, d, D, seed)
	if err != nil {
		return nil, err
	}
	m.Scale(3, m)
	return m, nil
}

// linearSites returns the rows of sites sites of a confounded design with
// effect 2 + x1, and the positions of each site's validation rows.
func linearSites(seed uint64, sites, rows int) (data []*estimator.Data, val [][]int) {
	rng := rand.New(rand.NewPCG(seed, 99))
	for range sites {
		d := &estimator.Data{X: mat.NewDense(rows, 2, nil), W: make([]float64, rows), Y: make([]float64, rows)}
		for i := range rows {
			x0, x1 := rng.NormFloat64(), rng.NormFloat64()
			d.X.Set(i, 0, x0)
			d.X.Set(i, 1, x1)
			if rng.Float64() < 1/(1+math.Exp(-x0)) {
				d.W[i] = 1
			}
			d.Y[i] = x0 + d.W[i]*(2+x1) + 0.5*rng.NormFloat64()
		}
		_, va, _ := Holdout(d.W, 0.3, seed)
		data, val = append(data, d), append(val, va)
	}
	return data, val
}

func smallConfig() estimator.Config {
	cfg := estimator.DefaultConfig()
	cfg.Features, cfg.Latent, cfg.Rounds, cfg.Samples = 16, 2, 20, 8
	return cfg
}

var schema2 = estimator.Schema{Binary: []bool{false, false}}

func TestRun(t *testing.T) {
	ctx := context.Background()
	data, val := linearSites(1, 2, 120)
	opt := Options{Kernels: []Kernel{{Name: "gaussian", Spectral: estimator.GaussianSpectral{}}, {Name: "narrow", Spectral: narrow{}}}, Z: DefaultZ}
	res, err := Run(ctx, data, val, schema2, smallConfig(), opt)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"latent/gaussian", "outcome/gaussian", "latent/narrow", "outcome/narrow",
		"tlearner/1", "dr/1", "tlearner/10", "dr/10", "tlearner/100", "dr/100", "ensemble"}
	if len(res.Candidates) != len(want) {
		t.Fatalf("%d candidates, want %d", len(res.Candidates), len(want))
	}
	chosen := 0
	for c, cand := range res.Candidates {
		if cand.Name != want[c] {
			t.Errorf("candidate %d is %s, want %s", c, cand.Name, want[c])
		}
		if cand.Chosen {
			chosen++
			if c != res.Chosen {
				t.Errorf("candidate %d marked chosen, Result.Chosen %d", c, res.Chosen)
			}
		}
	}
	if chosen != 1 || res.Chosen != len(want)-1 || res.Candidates[0].Diff != 0 || res.Candidates[0].DiffSE != 0 {
		t.Errorf("%d chosen, the ensemble %d; reference difference %v ± %v", chosen, res.Chosen, res.Candidates[0].Diff, res.Candidates[0].DiffSE)
	}

	// The scores are the losses of the candidates' CATEs against the
	// criterion's pseudo-outcomes, cross-fitted on each site's rows under
	// the reference model's setup with no model trained on a validation
	// row, recomputed here from the pieces.
	for c := range res.Candidates {
		var sum, n float64
		for s, d := range data {
			nu, err := estimator.CrossFitExcept(ctx, res.Models[0].Setup, s, d, val[s])
			if err != nil {
				t.Fatal(err)
			}
			psi, err := PseudoOutcomes(d, nu, nil)
			if err != nil {
				t.Fatal(err)
			}
			// The CATEs of all the site's rows, as SiteLosses computes
			// them: the latent CATE's samples depend on the rows scored.
			cate, err := res.CATE(ctx, c, s, d)
			if err != nil {
				t.Fatal(err)
			}
			if c == res.Chosen { // the ensemble's loss is of its mean before the shift
				for j := range cate {
					cate[j] -= res.Ensemble.Sites[s].Shift
				}
			}
			for _, i := range val[s] {
				sum += (psi[i] - cate[i]) * (psi[i] - cate[i])
				n++
			}
		}
		if got := res.Candidates[c].Loss; math.Abs(got-sum/n) > 1e-9*sum/n {
			t.Errorf("%s: loss %v, recomputed %v", res.Candidates[c].Name, got, sum/n)
		}
	}

	// The ensemble's CATE is its members' mean plus the shift.
	held := data[0].Subset(val[0])
	ens, err := res.CATE(ctx, res.Chosen, 0, held)
	if err != nil {
		t.Fatal(err)
	}
	mean := make([]float64, len(ens))
	for c, cand := range res.Candidates {
		if !cand.Member {
			continue
		}
		cate, err := res.CATE(ctx, c, 0, held)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range cate {
			mean[i] += v / float64(len(res.Ensemble.Members))
		}
	}
	shift := res.Ensemble.Sites[0].Shift
	for i := range ens {
		if math.Abs(ens[i]-mean[i]-shift) > 1e-9 {
			t.Fatalf("row %d: ensemble CATE %v, members' mean %v plus shift %v", i, ens[i], mean[i], shift)
		}
	}
	t.Logf("ensemble of %v, shifts %+v (spread %v)", res.Ensemble.Members, res.Ensemble.Sites, res.Ensemble.Spread)
	// Only an ensemble's members say which kernel's model they need.
	if _, err := (Estimator{Kind: KindOutcome}).CATEModels(ctx, res.Models, 0, held, nil); !errors.Is(err, ErrInput) {
		t.Errorf("an outcome estimator given %d models: %v, want ErrInput", len(res.Models), err)
	}

	// A kept Estimator, through JSON, gives the candidate's CATE.
	for c := range res.Candidates {
		e, k, err := res.Estimator(c, 0)
		if err != nil {
			t.Fatal(err)
		}
		js, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var back Estimator
		if err := json.Unmarshal(js, &back); err != nil {
			t.Fatal(err)
		}
		held := data[1].Subset(val[1])
		var got []float64
		if back.Kind == KindEnsemble {
			got, err = back.CATEModels(ctx, res.Models, 1, held, nil)
		} else {
			got, err = back.CATE(ctx, res.Models[k], 1, held, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		want, _ := res.CATE(ctx, c, 1, held)
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-12*math.Max(1, math.Abs(want[i])) {
				t.Fatalf("%s: kept estimator gives %v for row %d, want %v", res.Candidates[c].Name, got[i], i, want[i])
			}
		}
	}
}

func TestRunKinds(t *testing.T) {
	ctx := context.Background()
	data, val := linearSites(2, 1, 100)
	opt := Options{Kernels: []Kernel{{Name: "gaussian", Spectral: estimator.GaussianSpectral{}}}, Kinds: []string{KindTLearner}, Z: DefaultZ}
	res, err := Run(ctx, data, val, schema2, smallConfig(), opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Candidates) != 4 || res.Candidates[0].Name != "tlearner/1" || res.Candidates[3].Name != "ensemble" {
		t.Errorf("candidates %+v, want the three T-learners, tlearner/1 first, and the ensemble", res.Candidates)
	}
	opt.Kinds = []string{"forest"}
	if _, err := Run(ctx, data, val, schema2, smallConfig(), opt); !errors.Is(err, ErrInput) {
		t.Errorf("unknown kind: %v, want ErrInput", err)
	}
}

// TestRunGridPoint: a kernel at a point of the grid fits its models with
// its own D and γ, and the others keep the configuration's.
func TestRunGridPoint(t *testing.T) {
	ctx := context.Background()
	data, val := linearSites(2, 1, 100)
	zero := 0.0
	opt := Options{Kernels: []Kernel{
		{Name: "gaussian", Spectral: estimator.GaussianSpectral{}},
		{Name: "gaussian(features=6,linear=0)", Spectral: estimator.GaussianSpectral{}, GridPoint: GridPoint{Features: 6, Linear: &zero}},
	}, Kinds: []string{KindLatent}, Z: DefaultZ}
	cfg := smallConfig()
	res, err := Run(ctx, data, val, schema2, cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][2]float64{{float64(cfg.Features), cfg.Linear}, {6, 0}} {
		got := res.Models[i].Setup.Config
		if float64(got.Features) != want[0] || got.Linear != want[1] {
			t.Errorf("kernel %d: D %d, γ %v; want %v, %v", i, got.Features, got.Linear, want[0], want[1])
		}
	}
	if cfg.Linear == 0 {
		t.Fatal("the configuration's γ is 0: the test needs another")
	}
	if res.Candidates[1].Name != "latent/gaussian(features=6,linear=0)" {
		t.Errorf("candidates %+v", res.Candidates)
	}
}

// TestRunNoTransferCandidate: a grid point of transfer none fits its
// kernel's models with λ ≡ 0 (each site on its own rows), beside the
// learned transfer's, and a transfer mode nobody knows is refused.
func TestRunNoTransferCandidate(t *testing.T) {
	ctx := context.Background()
	data, val := linearSites(4, 2, 100)
	opt := Options{Kernels: []Kernel{
		{Name: "gaussian", Spectral: estimator.GaussianSpectral{}},
		{Name: "gaussian(transfer=none)", Spectral: estimator.GaussianSpectral{}, GridPoint: GridPoint{Transfer: "none"}},
	}, Kinds: []string{KindLatent, KindOutcome}, Z: DefaultZ}
	res, err := Run(ctx, data, val, schema2, smallConfig(), opt)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []estimator.Transfer{estimator.Learned, estimator.NoTransfer} {
		m := res.Models[i]
		if m.Setup.Config.Transfer != want {
			t.Errorf("kernel %d: transfer %v, want %v", i, m.Setup.Config.Transfer, want)
		}
		lam := m.Trained(estimator.Latent).LambdaRows()
		if off := lam[0][1]; (want == estimator.NoTransfer) != (off == 0) {
			t.Errorf("kernel %d (%v): λ from site 2 to site 1 is %v", i, want, off)
		}
	}
	if got := res.Candidates[2].Name; got != "latent/gaussian(transfer=none)" {
		t.Errorf("candidate 2 is %s", got)
	}
	opt.Kernels[1].Transfer = "some"
	if _, err := Run(ctx, data, val, schema2, smallConfig(), opt); !errors.Is(err, ErrInput) {
		t.Errorf("transfer some: %v, want ErrInput", err)
	}
}

func TestRunErrors(t *testing.T) {
	ctx := context.Background()
	data, val := linearSites(3, 2, 40)
	kernels := []Kernel{{Name: "gaussian", Spectral: estimator.GaussianSpectral{}}}
	for _, tc := range []struct {
		name string
		val  [][]int
		opt  Options
	}{
		{"no kernel", val, Options{}},
		{"unequal sites", val[:1], Options{Kernels: kernels}},
		{"one validation row", [][]int{val[0], {3}}, Options{Kernels: kernels}},
		{"no validation row anywhere", [][]int{nil, nil}, Options{Kernels: kernels}},
		{"positions out of order", [][]int{val[0], {5, 3}}, Options{Kernels: kernels}},
		{"a repeated position", [][]int{val[0], {3, 3}}, Options{Kernels: kernels}},
		{"a position past the rows", [][]int{val[0], {3, 40}}, Options{Kernels: kernels}},
	} {
		if _, err := Run(ctx, data, tc.val, schema2, smallConfig(), tc.opt); !errors.Is(err, ErrInput) {
			t.Errorf("%s: %v, want ErrInput", tc.name, err)
		}
	}
	if _, err := (Estimator{Kind: KindDR}).CATE(ctx, nil, 0, data[0], nil); !errors.Is(err, ErrInput) {
		t.Errorf("dr estimator without its regression: %v", err)
	}
	if _, err := (Estimator{Kind: "forest"}).CATE(ctx, nil, 0, data[0], nil); !errors.Is(err, ErrInput) {
		t.Errorf("unknown kind: %v", err)
	}
}

func TestHoldout(t *testing.T) {
	w := make([]float64, 103)
	for i := range w {
		if i%4 == 0 {
			w[i] = 1
		}
	}
	train, val, err := Holdout(w, 0.2, 7)
	if err != nil {
		t.Fatal(err)
	}
	var arms [2]int
	for _, i := range val {
		arms[int(w[i])]++
	}
	// 26 treated and 77 control rows: 5 and 15 held out.
	if arms != [2]int{15, 5} || len(train)+len(val) != len(w) {
		t.Errorf("held out %v (control, treated) of %d rows, train %d", arms, len(w), len(train))
	}
	again, _, _ := Holdout(w, 0.2, 7)
	other, _, _ := Holdout(w, 0.2, 8)
	if !slices.Equal(train, again) || slices.Equal(train, other) {
		t.Error("Holdout is not a function of its seed")
	}
	for _, tc := range []struct {
		w     []float64
		share float64
	}{{w, 0}, {w, 1}, {w, math.NaN()}, {[]float64{0, 2}, 0.5}} {
		if _, _, err := Holdout(tc.w, tc.share, 1); !errors.Is(err, ErrInput) {
			t.Errorf("Holdout(%v, %v): %v, want ErrInput", tc.w, tc.share, err)
		}
	}
}

// TestSiteStatsChunks: a site of more rows than estimator.FeatureChunk
// sums its ridge statistics, and computes the ridge candidates' CATEs,
// chunk by chunk, with the results of all its features at once.
func TestSiteStatsChunks(t *testing.T) {
	ctx := context.Background()
	d, m := chunkedSite(t, 3, estimator.FeatureChunk+37)
	st, err := SiteStats(ctx, m, 0, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := d.Rows()
	phi, err := m.OutcomeFeatures(d, 0, n)
	if err != nil {
		t.Fatal(err)
	}
	var rows [2][]int
	for i, w := range d.W {
		rows[int(w)] = append(rows[int(w)], i)
	}
	for a := range 2 {
		want := estimator.NewRidgeStats(m.OutcomeFeatureCount())
		if err := want.AddRows(phi, d.Y, rows[a]); err != nil {
			t.Fatal(err)
		}
		got := st.Arms[a]
		if got.N != want.N || math.Abs(got.TargetSum-want.TargetSum) > 1e-9*math.Abs(want.TargetSum) {
			t.Errorf("arm %d: n %v, Σy %v; want %v, %v", a, got.N, got.TargetSum, want.N, want.TargetSum)
		}
		for name, pair := range map[string][2][]float64{"Gram": {got.Gram, want.Gram}, "Moment": {got.Moment, want.Moment}, "FeatSum": {got.FeatSum, want.FeatSum}} {
			for j := range pair[1] {
				if math.Abs(pair[0][j]-pair[1][j]) > 1e-9*(1+math.Abs(pair[1][j])) {
					t.Fatalf("arm %d: %s[%d] = %v in chunks, %v at once", a, name, j, pair[0][j], pair[1][j])
				}
			}
		}
	}
	cands, ests, err := RidgeCandidates(st, []float64{1}, []string{KindTLearner})
	if err != nil || len(cands) != 1 {
		t.Fatalf("candidates %v: %v", cands, err)
	}
	cate, err := ests[0].CATE(ctx, m, 0, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	y0, y1 := ests[0].Arms[0].Predict(phi), ests[0].Arms[1].Predict(phi)
	if len(cate) != n {
		t.Fatalf("%d CATEs of %d rows", len(cate), n)
	}
	for i := range cate {
		if want := y1[i] - y0[i]; math.Abs(cate[i]-want) > 1e-12*(1+math.Abs(want)) {
			t.Fatalf("row %d: CATE %v in chunks, %v at once", i, cate[i], want)
		}
	}
}

// TestShiftTowardsTruth: the latent CATE of a small model misses the true
// ATE (the mean of 2 + x1 over the sites' rows); the ensemble's shift must
// move the mean of the reported CATEs most of the way to it.
func TestShiftTowardsTruth(t *testing.T) {
	ctx := context.Background()
	data, val := linearSites(5, 2, 400)
	opt := Options{Kernels: []Kernel{{Name: "gaussian", Spectral: estimator.GaussianSpectral{}}}, Kinds: []string{KindLatent}, Z: DefaultZ}
	// The shift relies on the nuisances of ψ: 60 rounds fit them well
	// enough, while the latent CATE of two latent dimensions stays off.
	cfg := smallConfig()
	cfg.Rounds = 60
	res, err := Run(ctx, data, val, schema2, cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	var before, after, n float64
	for s, d := range data {
		cate, err := res.CATE(ctx, res.Chosen, s, d)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range cate {
			truth := 2 + d.X.At(i, 1)
			after += v - truth
			before += v - res.Ensemble.Sites[s].Shift - truth
			n++
		}
	}
	before, after = math.Abs(before/n), math.Abs(after/n)
	t.Logf("mean CATE error %.3f before the shifts %+v (spread %.3f), %.3f after", before, res.Ensemble.Sites, res.Ensemble.Spread, after)
	if !(before > 0.25 && after < before/3) {
		t.Errorf("mean CATE error %.3f before the shift, %.3f after: want an attenuated latent CATE (> 0.25) brought within a third of its error", before, after)
	}
}

// TestHeldOutRowsDoNotReachTheModels: the models, their standardisation
// included, are fitted on training rows only, so that moving every
// held-out outcome far away leaves them as they were; the candidates'
// scores, made on those rows, move.
func TestHeldOutRowsDoNotReachTheModels(t *testing.T) {
	ctx := context.Background()
	opt := Options{Kernels: []Kernel{{Name: "gaussian", Spectral: estimator.GaussianSpectral{}}}, Kinds: []string{KindLatent, KindOutcome}, Z: DefaultZ}
	run := func(shift float64) *Result {
		data, val := linearSites(3, 2, 120)
		for s, d := range data {
			for _, i := range val[s] {
				d.Y[i] += shift
			}
		}
		res, err := Run(ctx, data, val, schema2, smallConfig(), opt)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b := run(0), run(50)
	if sa, sb := a.Models[0].Setup.Scaler, b.Models[0].Setup.Scaler; sa.YMean != sb.YMean || sa.YSD != sb.YSD {
		t.Errorf("the held-out outcomes moved the standardisation: y mean %v → %v, sd %v → %v", sa.YMean, sb.YMean, sa.YSD, sb.YSD)
	}
	for c := range a.Candidates[:2] {
		d := &estimator.Data{X: mat.NewDense(3, 2, []float64{0, 0, 1, -1, -1, 1}), W: []float64{0, 1, 0}, Y: []float64{0, 0, 0}}
		ca, err := a.CATE(ctx, c, 0, d)
		if err != nil {
			t.Fatal(err)
		}
		cb, err := b.CATE(ctx, c, 0, d)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ca, cb) {
			t.Errorf("%s: CATE %v with the held-out outcomes moved, %v without", a.Candidates[c].Name, cb, ca)
		}
	}
	if a.Candidates[1].Loss == b.Candidates[1].Loss {
		t.Errorf("the held-out outcomes did not move the validation loss (%v)", a.Candidates[1].Loss)
	}
}

// TestHeldOutOutcomeBelowZero: the log transform of outcomes is chosen
// only when every row, held out or not, has y > 0: a held-out row at or
// below 0 turns it off, where the training rows alone would have chosen it
// and the row's pseudo-outcome could not be computed.
func TestHeldOutOutcomeBelowZero(t *testing.T) {
	data, val := linearSites(6, 2, 120)
	for _, d := range data {
		for i := range d.Y {
			d.Y[i] = math.Exp(d.Y[i] / 4)
		}
	}
	opt := Options{Kernels: []Kernel{{Name: "gaussian", Spectral: estimator.GaussianSpectral{}}}, Kinds: []string{KindOutcome}, Z: DefaultZ}
	res, err := Run(context.Background(), data, val, schema2, smallConfig(), opt)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Models[0].Setup.Scaler.LogYValid {
		t.Fatal("positive outcomes without the log transform: the test needs one")
	}
	data[1].Y[val[1][0]] = -0.5
	if res, err = Run(context.Background(), data, val, schema2, smallConfig(), opt); err != nil {
		t.Fatalf("a held-out outcome below 0: %v", err)
	}
	if res.Models[0].Setup.Scaler.LogYValid {
		t.Error("the log transform chosen although a held-out outcome is below 0")
	}
}

func TestSplitTransfer(t *testing.T) {
	for _, tc := range []struct{ label, base, transfer string }{
		{"gaussian", "gaussian", ""},
		{"gaussian(transfer=none)", "gaussian", "none"},
		{"matern(nu=0.5,transfer=none)", "matern(nu=0.5)", "none"},
		{"gaussian(features=10,linear=0,transfer=full)", "gaussian(features=10,linear=0)", "full"},
		{"matern(nu=0.5)", "matern(nu=0.5)", ""},
		{"gaussian(features=10)", "gaussian(features=10)", ""},
	} {
		if b, tr := SplitTransfer(tc.label); b != tc.base || tr != tc.transfer {
			t.Errorf("SplitTransfer(%q) = %q, %q; want %q, %q", tc.label, b, tr, tc.base, tc.transfer)
		}
	}
}

// TestStatsOfRowsInPlace: the ridge statistics and the moments of rows
// picked in place, a chunk at a time, are bit for bit those of their copy.
func TestStatsOfRowsInPlace(t *testing.T) {
	ctx := context.Background()
	d, m := chunkedSite(t, 5, 3*estimator.FeatureChunk+301)
	var rows []int
	for i := range d.Rows() {
		if i%7 != 3 {
			rows = append(rows, i)
		}
	}
	psi := make([]float64, len(rows))
	for k := range psi {
		psi[k] = float64(k%11) - 5
	}
	copied, err := SiteStats(ctx, m, 0, d.Subset(rows), psi)
	if err != nil {
		t.Fatal(err)
	}
	inPlace, err := SiteStatsRows(ctx, m, 0, d, rows, psi)
	if err != nil {
		t.Fatal(err)
	}
	for k, pair := range [][2]*estimator.RidgeStats{{copied.Arms[0], inPlace.Arms[0]}, {copied.Arms[1], inPlace.Arms[1]}, {copied.DR, inPlace.DR}} {
		a, b := pair[0], pair[1]
		if a.N != b.N || a.TargetSum != b.TargetSum || !slices.Equal(a.Gram, b.Gram) || !slices.Equal(a.Moment, b.Moment) || !slices.Equal(a.FeatSum, b.FeatSum) {
			t.Errorf("statistics %d differ", k)
		}
	}
	// The chunks are computed on every core and added in order: one core
	// gives the same statistics, bit for bit.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	one, err := SiteStatsRows(ctx, m, 0, d, rows, psi)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GOMAXPROCS(3)
	three, err := SiteStatsRows(ctx, m, 0, d, rows, psi)
	if err != nil {
		t.Fatal(err)
	}
	for k, st := range []Stats{one, three} {
		for a, pair := range [][2]*estimator.RidgeStats{{inPlace.Arms[0], st.Arms[0]}, {inPlace.Arms[1], st.Arms[1]}, {inPlace.DR, st.DR}} {
			a2, b := pair[0], pair[1]
			if a2.N != b.N || a2.TargetSum != b.TargetSum || !slices.Equal(a2.Gram, b.Gram) || !slices.Equal(a2.Moment, b.Moment) || !slices.Equal(a2.FeatSum, b.FeatSum) {
				t.Errorf("cores %d: statistics %d differ from the default cores'", []int{1, 3}[k], a)
			}
		}
	}
	want, got := d.Subset(rows).MomentsWithin(d), momentsOf(d, rows)
	if want.N != got.N || !slices.Equal(want.Sum, got.Sum) || !slices.Equal(want.SumSq, got.SumSq) || want.LogSum != got.LogSum || want.Positive != got.Positive {
		t.Errorf("moments %+v, want %+v", got, want)
	}
	if _, err := SiteStatsRows(ctx, m, 0, d, rows, psi[1:]); !errors.Is(err, ErrInput) {
		t.Errorf("pseudo-outcomes of the wrong length: %v", err)
	}
}

// chunkedSite returns one linear site of n rows (seed seed), more than a
// feature chunk, and a model fitted on it in three rounds.
func chunkedSite(t *testing.T, seed uint64, n int) (*estimator.Data, *estimator.Model) {
	t.Helper()
	data, _ := linearSites(seed, 1, n)
	cfg := smallConfig()
	cfg.Rounds = 3
	m, err := estimator.Fit(context.Background(), data, schema2, estimator.GaussianSpectral{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data[0], m
}
