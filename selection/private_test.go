package selection

import (
	"context"
	"math"
	"slices"
	"testing"

	"gonum.org/v1/gonum/floats"

	"github.com/crffd/crffd/estimator"
)

// privateFixture is a site's rows with outliers, a model fitted on them
// (a fixed, released object to the mechanism), and candidates of every
// kind.
type privateFixture struct {
	d     *estimator.Data
	m     *estimator.Model
	ests  []Estimator
	key   []byte
	share float64
}

// outliers are the fixture's rows of far covariates and outcomes.
var outliers = []int{3, 40, 41, 77}

func newPrivateFixture(t *testing.T) privateFixture {
	t.Helper()
	ctx := context.Background()
	data, _ := linearSites(7, 1, 90)
	d := data[0]
	// The model is fitted before the outliers are added, so that its
	// scaler, and the bounds that follow from it, are those of the bulk of
	// the rows (to the mechanism the model is a fixed, released object).
	cfg := smallConfig()
	cfg.Rounds = 5
	scaler, err := estimator.PooledScaler([]*estimator.Data{d}, schema2)
	if err != nil {
		t.Fatal(err)
	}
	setup, err := estimator.NewSetup(ctx, schema2, estimator.GaussianSpectral{}, cfg, scaler)
	if err != nil {
		t.Fatal(err)
	}
	m, err := estimator.FitSetup(ctx, []*estimator.Data{d}, setup)
	if err != nil {
		t.Fatal(err)
	}
	// Outliers: far covariates and outcomes, which unclipped would move
	// every sum by far more than its sensitivity.
	for _, i := range outliers {
		d.X.Set(i, 0, 40*float64(i%3-1)+25)
		d.X.Set(i, 1, -30)
		d.Y[i] = 500 * float64(1-2*(i%2))
	}
	// Two identical rows: their coins differ by their copy number.
	copy(d.X.RawRowView(11), d.X.RawRowView(10))
	d.W[11], d.Y[11] = d.W[10], d.Y[10]
	nu, err := estimator.CrossFit(ctx, m.Setup, 0, d)
	if err != nil {
		t.Fatal(err)
	}
	psi, err := PseudoOutcomes(d, nu, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := SiteStats(ctx, m, 0, d, psi)
	if err != nil {
		t.Fatal(err)
	}
	_, ests, err := RidgeCandidates(st, []float64{10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ests = append([]Estimator{{Kind: KindLatent}, {Kind: KindOutcome}}, ests...)
	return privateFixture{d: d, m: m, ests: ests, key: []byte("a site's holdout key"), share: 0.3}
}

// pieces returns what a private site's stats and losses release of rows
// d, before the noise, each with the sensitivity charged for it.
type piece struct {
	v    []float64
	sens float64
}

func (f privateFixture) pieces(t *testing.T, d *estimator.Data, clip PrivateClip) (stats, losses []piece) {
	t.Helper()
	ctx := context.Background()
	record := func(out *[]piece) AddNoise {
		return func(v []float64, sens float64) (float64, error) {
			*out = append(*out, piece{slices.Clone(v), sens})
			return 0, nil
		}
	}
	held, err := KeyedHoldout(d, f.share, f.key, 0)
	if err != nil || held == nil {
		t.Fatalf("holdout: %v, %d rows", err, len(held))
	}
	rows, err := TrainingRows(d.Rows(), held)
	if err != nil {
		t.Fatal(err)
	}
	st, err := PrivateSiteStats(ctx, f.m, 0, d.Subset(rows), true, clip)
	if err != nil {
		t.Fatal(err)
	}
	if err := NoiseStats(&st, f.sensClip(clip), record(&stats)); err != nil {
		t.Fatal(err)
	}
	nu, err := f.m.Nuisance(0, d)
	if err != nil {
		t.Fatal(err)
	}
	models := make([]*estimator.Model, len(f.ests))
	for c := range models {
		models[c] = f.m
	}
	sums, err := PrivateSiteLosses(ctx, nu, 0, d, held, f.ests, models, clip, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := sums.Noise(f.sensClip(clip), record(&losses)); err != nil {
		t.Fatal(err)
	}
	return stats, losses
}

// sensClip is the clip whose sensitivities are charged: the model's own,
// whatever clip the sums were computed with.
func (f privateFixture) sensClip(PrivateClip) PrivateClip {
	c, _ := NewPrivateClip(f.m)
	return c
}

// without returns d without row i.
func without(d *estimator.Data, i int) *estimator.Data {
	var keep []int
	for r := range d.Rows() {
		if r != i {
			keep = append(keep, r)
		}
	}
	return d.Subset(keep)
}

// worst returns the largest ‖piece(D) − piece(D′)‖ / sensitivity of each
// piece over D′ = D without each of rows in turn (nil: every row).
func worst(t *testing.T, f privateFixture, clip PrivateClip, rows []int) (stats, losses []float64) {
	t.Helper()
	s0, l0 := f.pieces(t, f.d, clip)
	if len(s0) != StatsPieces || len(l0) != LossPieces {
		t.Fatalf("%d stats and %d loss pieces released, charged %d and %d", len(s0), len(l0), StatsPieces, LossPieces)
	}
	stats, losses = make([]float64, len(s0)), make([]float64, len(l0))
	if rows == nil {
		for i := range f.d.Rows() {
			rows = append(rows, i)
		}
	}
	for _, i := range rows {
		s1, l1 := f.pieces(t, without(f.d, i), clip)
		for _, c := range []struct {
			a, b []piece
			out  []float64
		}{{s0, s1, stats}, {l0, l1, losses}} {
			for k := range c.a {
				diff := floats.Distance(c.a[k].v, c.b[k].v, 2)
				c.out[k] = math.Max(c.out[k], diff/c.a[k].sens)
			}
		}
	}
	return stats, losses
}

// TestPrivateSelectionSensitivity checks, on neighbouring datasets, the
// sensitivity charged for every piece a private site's selection
// releases: with the noise off, each piece on D and on D without one row
// (every row in turn, outliers and a duplicate among them) differs by at
// most the sensitivity the site calibrates its noise to. The holdout,
// the pseudo-outcomes and the latent CATEs are computed anew on each D′,
// so a row whose removal moved another row's term would show. The same
// rows without clipping exceed the bounds, which shows the test can fail.
func TestPrivateSelectionSensitivity(t *testing.T) {
	f := newPrivateFixture(t)
	clip, err := NewPrivateClip(f.m)
	if err != nil {
		t.Fatal(err)
	}
	statsNames := []string{"n", "Σφ", "Σy", "ΦᵀΦ", "Φᵀy", "Σψ", "Φᵀψ"}
	lossNames := []string{"Σe·e", "Σl·l", "Σe (centre)", "Σe² (centre)"}
	for _, tc := range []struct {
		name    string
		clip    PrivateClip
		within  bool  // every piece within its bound
		rows    []int // the rows removed in turn; nil: every row
		exceeds []string
	}{
		{"clipped", clip, true, nil, nil},
		{"unclipped", PrivateClip{Features: 1e9, YCentre: clip.YCentre, Y: 1e9, Psi: 1e9, Residual: 1e9}, false, outliers,
			[]string{"Σφ", "Σy", "ΦᵀΦ", "Φᵀy", "Σψ", "Φᵀψ", "Σe·e", "Σl·l", "Σe (centre)", "Σe² (centre)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stats, losses := worst(t, f, tc.clip, tc.rows)
			for _, c := range []struct {
				names []string
				got   []float64
			}{{statsNames, stats}, {lossNames, losses}} {
				for k, r := range c.got {
					over := r > 1+1e-9
					t.Logf("%s: max ‖Δ‖/sensitivity %.3g", c.names[k], r)
					switch {
					case tc.within && over:
						t.Errorf("%s moved by %.4g of its sensitivity when one row left", c.names[k], r)
					case !tc.within && slices.Contains(tc.exceeds, c.names[k]) && !over:
						t.Errorf("%s unclipped moved by %.4g of the clipped sensitivity: the rows cannot tell a missing clip", c.names[k], r)
					}
				}
			}
		})
	}
}

// TestKeyedHoldout: a row's place in the split depends on the row and the
// key alone. Removing a row leaves every other row where it was; another
// key draws another split; identical rows draw coins of their own; and
// about share of the rows are held out.
func TestKeyedHoldout(t *testing.T) {
	data, _ := linearSites(3, 1, 400)
	d := data[0]
	copy(d.X.RawRowView(1), d.X.RawRowView(0))
	d.W[1], d.Y[1] = d.W[0], d.Y[0]
	key := []byte("k")
	held, err := KeyedHoldout(d, 0.25, key, 5)
	if err != nil {
		t.Fatal(err)
	}
	if n := float64(len(held)); math.Abs(n-100) > 30 {
		t.Errorf("%v of 400 rows held out at share 0.25", n)
	}
	isHeld := func(h []int, i int) bool { _, ok := slices.BinarySearch(h, i); return ok }
	for _, r := range []int{0, 5, 200, 399} {
		h2, err := KeyedHoldout(without(d, r), 0.25, key, 5)
		if err != nil {
			t.Fatal(err)
		}
		for i := range d.Rows() {
			if i == r {
				continue
			}
			j := i
			if i > r {
				j = i - 1
			}
			if r == 0 && i == 1 {
				continue // the copy of row 0 becomes the first copy
			}
			if isHeld(held, i) != isHeld(h2, j) {
				t.Fatalf("removing row %d moved row %d", r, i)
			}
		}
	}
	other, _ := KeyedHoldout(d, 0.25, []byte("another key"), 5)
	if slices.Equal(other, held) {
		t.Error("another key drew the same split")
	}
	for _, tc := range []struct {
		name  string
		share float64
		key   []byte
	}{{"share 0", 0, key}, {"share 1", 1, key}, {"no key", 0.2, nil}} {
		if _, err := KeyedHoldout(d, tc.share, tc.key, 5); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if h, err := KeyedHoldout(d, 0.01, key, 5); err != nil || h != nil {
		t.Errorf("too few held out for min_arm_rows 5: %d rows (%v), want none", len(h), err)
	}
}

// TestNoisyRidge: statistics whose Gram carries noise of the variance the
// coordinator is told solve with the penalty raised, where the exact
// penalty leaves the system indefinite; exact statistics solve as before.
func TestNoisyRidge(t *testing.T) {
	p := 30
	r := estimator.NewRidgeStats(p)
	r.N = 50
	for j := range p {
		r.Gram[j*p+j] = 1
	}
	noisy := *r
	noisy.Gram = slices.Clone(r.Gram)
	for j := range p { // a symmetric perturbation with a negative eigenvalue of about −4
		for k := range p {
			noisy.Gram[j*p+k] -= 5.0 / float64(p)
		}
	}
	if _, err := noisy.Solve(1); err == nil {
		t.Fatal("the perturbed system solved at the exact penalty: the test has no teeth")
	}
	if _, err := solve(&noisy, 1, 1); err != nil {
		t.Errorf("noisy solve: %v", err)
	}
	a, err := solve(r, 1, 0)
	b, err2 := r.Solve(1)
	if err != nil || err2 != nil || a.Intercept != b.Intercept || !slices.Equal(a.Beta, b.Beta) {
		t.Errorf("exact statistics solved otherwise: %v %v", err, err2)
	}
}

// TestNoisySE: a score's standard error includes the noise's variance on
// its sum, v/n², and is the exact one without noise.
func TestNoisySE(t *testing.T) {
	for _, tc := range []struct{ se, v, n, want float64 }{
		{0.3, 0, 100, 0.3},
		{0.3, 1600, 100, 0.5},
		{0, 400, 10, 2},
	} {
		if got := noisySE(tc.se, tc.v, tc.n); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("noisySE(%v, %v, %v) = %v, want %v", tc.se, tc.v, tc.n, got, tc.want)
		}
	}
}

// TestRowwiseLatent: a row's latent CATE depends on the row alone, not on
// the rows before it: removing a row removes its CATE and leaves every
// other row's as it was, bit for bit. Copies of one row are
// interchangeable (their keys number them), so the CATEs are compared as
// multisets: the fixture holds a duplicate, whose remaining copy takes the
// removed copy's key, so that the last copy's CATE is the one that goes. The 90 rows fill some of the 64 slots twice, so rows
// move between batches. (The batched estimator.Model.Effects keys each
// row's draws by its position, and fails this.)
func TestRowwiseLatent(t *testing.T) {
	f := newPrivateFixture(t)
	ctx := context.Background()
	d := f.d
	all, err := RowwiseLatent(ctx, f.m, 0, d, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []int{0, 4, 10, 50, 89} {
		less, err := RowwiseLatent(ctx, f.m, 0, without(d, r), 2)
		if err != nil {
			t.Fatal(err)
		}
		// Removing one of several copies leaves the others numbered
		// from 0: as a multiset, the last copy's CATE goes.
		last := r
		for j := r + 1; j < d.Rows(); j++ {
			if d.W[j] == d.W[r] && d.Y[j] == d.Y[r] && slices.Equal(d.X.RawRowView(j), d.X.RawRowView(r)) {
				last = j
			}
		}
		want := append(append([]float64(nil), all[:last]...), all[last+1:]...)
		got := append([]float64(nil), less...)
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			moved := 0
			for i := range got {
				if got[i] != want[i] {
					moved++
				}
			}
			t.Errorf("without row %d, %d of the other rows' latent CATEs changed", r, moved)
		}
	}
}

// TestRecentreResiduals: a private site's centring sums of residuals give
// the gap that Σψ and Σ τ̂ give when nothing is clipped, with a variance
// no smaller than that of the mean of ψ − τ̄ (the members' mean sum of
// squares bounds that of their mean residual); the noise's variance adds
// to it.
func TestRecentreResiduals(t *testing.T) {
	psi := []float64{1, 3, -2, 4, 0.5, 2, 6, -1}
	cates := [][]float64{{1, 1, 1, 1, 1, 1, 1, 1}, {0, 2, -1, 3, 1, 2, 4, 0}, {2, 2, 0, 2, 2, 2, 2, 2}}
	exact, err := CentreSums(psi, cates)
	if err != nil {
		t.Fatal(err)
	}
	res := Centre{N: exact.N, CATE: make([]float64, 3), Res: make([]float64, 3), ResSq: make([]float64, 3)}
	for c, tau := range cates {
		for i, v := range psi {
			res.Res[c] += v - tau[i]
			res.ResSq[c] += (v - tau[i]) * (v - tau[i])
		}
	}
	noisy := res
	noisy.ResVar = 4
	n := float64(len(psi))
	for _, members := range [][]int{{0}, {1, 2}, {0, 1, 2}} {
		want, _, err := Recentre([]Centre{exact}, members)
		if err != nil {
			t.Fatal(err)
		}
		// The variance of the mean of ψ − τ̄ over the rows.
		var s1, s2 float64
		for i, v := range psi {
			var tau float64
			for _, m := range members {
				tau += cates[m][i]
			}
			r := v - tau/float64(len(members))
			s1, s2 = s1+r, s2+r*r
		}
		least := (s2 - s1*s1/n) / (n - 1) / n
		for _, tc := range []struct {
			name  string
			ce    Centre
			noise float64 // the noise's variance on the mean
		}{{"residuals", res, 0}, {"noisy residuals", noisy, 4 / float64(len(members)) / (n * n)}} {
			got, _, err := Recentre([]Centre{tc.ce}, members)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got[0].Gap-want[0].Gap) > 1e-12 || got[0].GapSE*got[0].GapSE < least+tc.noise-1e-12 {
				t.Errorf("members %v, %s: gap %v, variance %v; want %v, at least %v", members, tc.name, got[0].Gap, got[0].GapSE*got[0].GapSE, want[0].Gap, least+tc.noise)
			}
		}
	}
}
