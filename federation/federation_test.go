package federation

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/internal/memnet"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/inference"
)

// testSchema has two binary and two continuous covariates.
var testSchema = estimator.Schema{Binary: []bool{true, false, true, false}}

var testColumns = []string{"b1", "c1", "b2", "c2"}

// makeData draws n rows of site s.
func makeData(n, s int) *estimator.Data {
	r := rand.New(rand.NewPCG(uint64(s)+1, 7))
	d := &estimator.Data{X: mat.NewDense(n, 4, nil), W: make([]float64, n), Y: make([]float64, n)}
	for i := range n {
		x := []float64{float64(r.IntN(2)), r.NormFloat64() + float64(s), float64(r.IntN(2)), 3 * r.NormFloat64()}
		d.X.SetRow(i, x)
		if r.Float64() < 1/(1+math.Exp(-x[1]+float64(s))) {
			d.W[i] = 1
		}
		d.Y[i] = x[1] + x[0] + d.W[i]*(2+x[3]/3) + r.NormFloat64()
	}
	return d
}

func testConfig() estimator.Config {
	c := estimator.DefaultConfig()
	c.Features, c.Latent, c.Rounds, c.Samples, c.Workers = 10, 2, 8, 10, 1
	c.Seed = 1<<40 + 12345
	return c
}

// fed is an in-memory federation of sites.
type fed struct {
	net    *memnet.Network
	names  []string
	data   []*estimator.Data
	cfgs   []SiteConfig
	mu     sync.Mutex
	audits map[string][]string
}

func newFed(sizes ...int) *fed {
	f := &fed{net: NewMemNetwork(), audits: map[string][]string{}}
	for s, n := range sizes {
		name := fmt.Sprintf("site%d", s+1)
		f.names = append(f.names, name)
		d := makeData(n, s)
		f.data = append(f.data, d)
		f.cfgs = append(f.cfgs, SiteConfig{Name: name, Coordinator: "coord", Data: d, Schema: testSchema,
			Columns: testColumns, Spectral: estimator.GaussianSpectral{},
			Audit: func(_ context.Context, dir Direction, e *wire.Envelope) error {
				f.mu.Lock()
				defer f.mu.Unlock()
				f.audits[name] = append(f.audits[name], fmt.Sprintf("%d %s", dir, e.Kind))
				return nil
			}})
	}
	return f
}

type siteRun struct {
	res *SiteResult
	err error
}

// start runs every site in the background.
func (f *fed) start(ctx context.Context) []chan siteRun {
	out := make([]chan siteRun, len(f.cfgs))
	for s, c := range f.cfgs {
		out[s] = make(chan siteRun, 1)
		go func() {
			r, err := RunSite(ctx, c, f.net.Endpoint(c.Name))
			out[s] <- siteRun{r, err}
		}()
	}
	return out
}

// waitSites waits for every site started by start and fails the test on
// the first error; it returns the sites' results in order.
func waitSites(t *testing.T, sites []chan siteRun) []*SiteResult {
	t.Helper()
	out := make([]*SiteResult, len(sites))
	for s, ch := range sites {
		r := <-ch
		if r.err != nil {
			t.Fatalf("site %d: %v", s+1, r.err)
		}
		out[s] = r.res
	}
	return out
}

// referenceRun runs an uninterrupted federation of sites of the given sizes
// and returns the coordinator's result and the sites' results.
func referenceRun(ctx context.Context, t *testing.T, cfg estimator.Config, sizes ...int) (*Result, []*SiteResult) {
	t.Helper()
	f := newFed(sizes...)
	sites := f.start(ctx)
	res, err := RunCoordinator(ctx, f.coordinator(cfg), f.net.Endpoint("coord"))
	if err != nil {
		t.Fatal(err)
	}
	return res, waitSites(t, sites)
}

// restartSite runs site s under killCtx and, once that process has ended
// (killCtx cancelled), starts it afresh under ctx with configuration again,
// as a restarted daemon would; gone, when not nil, is called in between.
// The channel carries the second process's result.
func (f *fed) restartSite(killCtx, ctx context.Context, s int, again SiteConfig, gone func()) chan siteRun {
	name := f.cfgs[s].Name
	second := make(chan siteRun, 1)
	go func() {
		_, _ = RunSite(killCtx, f.cfgs[s], f.net.Endpoint(name))
		if gone != nil {
			gone()
		}
		r, err := RunSite(ctx, again, f.net.Endpoint(name))
		second <- siteRun{r, err}
	}()
	return second
}

func (f *fed) coordinator(cfg estimator.Config) CoordinatorConfig {
	return CoordinatorConfig{Name: "coord", RunID: "run-1", Sites: f.names, Config: cfg,
		Spectral: estimator.GaussianSpectral{}, RoundTimeout: 5 * time.Second, Retries: 2}
}

// sameModels fails the test unless every model of res is bit-identical
// to want's; msg, with the difference for %g, says what went wrong.
func sameModels(t *testing.T, res *Result, want func(estimator.Kind) *estimator.Trained, msg string) {
	t.Helper()
	for _, k := range estimator.Kinds {
		if d := maxDiff(t, res.Models[k], want(k)); d != 0 {
			t.Errorf("%s: "+msg, k, d)
		}
	}
}

// modelsOf returns r's model of each kind.
func modelsOf(r *Result) func(estimator.Kind) *estimator.Trained {
	return func(k estimator.Kind) *estimator.Trained { return r.Models[k] }
}

func maxDiff(t *testing.T, a, b *estimator.Trained) float64 {
	t.Helper()
	d := 0.0
	for s := range a.Weights {
		for name, w := range a.Weights[s] {
			v, ok := b.Weights[s][name]
			if !ok {
				t.Fatalf("block %s missing", name)
			}
			var x mat.Dense
			x.Sub(w, v)
			d = math.Max(d, mat.Norm(&x, math.Inf(1)))
		}
	}
	for name, v := range a.Shared {
		for i := range v {
			d = math.Max(d, math.Abs(v[i]-b.Shared[name][i]))
		}
	}
	var x mat.Dense
	x.Sub(a.Lambda, b.Lambda)
	return math.Max(d, mat.Norm(&x, math.Inf(1)))
}

// runEquivalent fits f's sites by simulated federation and by the
// coordinator and site roles, and checks that every model is bit-identical.
// It returns the simulated model, the coordinator's result and the sites'
// channels.
func runEquivalent(ctx context.Context, t *testing.T, f *fed, cfg estimator.Config) (*estimator.Model, *Result, []chan siteRun) {
	t.Helper()
	want, err := estimator.Fit(ctx, f.data, testSchema, estimator.GaussianSpectral{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sites := f.start(ctx)
	res, err := RunCoordinator(ctx, f.coordinator(cfg), f.net.Endpoint("coord"))
	if err != nil {
		t.Fatal(err)
	}
	sameModels(t, res, want.Trained, "max abs difference %g, want bit-identical")
	return want, res, sites
}

func TestEquivalenceWithSimulatedFederation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newFed(60, 80, 50)
	want, res, sites := runEquivalent(ctx, t, f, testConfig())
	ates := make([]float64, len(sites))
	var sums inference.Sums
	var within float64
	local := make([]inference.Estimate, len(sites))
	for s, ch := range sites {
		r := <-ch
		if r.err != nil {
			t.Fatalf("site %d: %v", s, r.err)
		}
		eff, err := want.Effects(ctx, s, f.data[s])
		if err != nil {
			t.Fatal(err)
		}
		for i := range eff.CATE {
			if eff.CATE[i] != r.res.Effects.CATE[i] {
				t.Fatalf("site %d row %d: CATE %g, simulated %g", s, i, r.res.Effects.CATE[i], eff.CATE[i])
			}
		}
		ates[s] = eff.ATE
		if r.res.Global.PlugIn.Estimate != res.GlobalATE || r.res.Local.PlugIn.N != f.data[s].Rows() {
			t.Errorf("site %d: global %g (coordinator %g), n %d", s, r.res.Global.PlugIn.Estimate, res.GlobalATE, r.res.Local.PlugIn.N)
		}
		// The AIPW estimate of the simulated federation: the site's own
		// cross-fitted nuisances under the federation's setup.
		nu, err := estimator.CrossFit(ctx, want.Setup, s, f.data[s])
		if err != nil {
			t.Fatal(err)
		}
		an, err := inference.Analyse(f.data[s].W, f.data[s].Y, nu, r.res.Effects.CATE, f.data[s].X)
		if err != nil {
			t.Fatal(err)
		}
		e, ss := an.AIPW, an.Sums
		if r.res.Calibration == nil || fmt.Sprint(r.res.Calibration.Params()) != fmt.Sprint(an.Calibration.Params()) {
			t.Errorf("site %d: calibration %+v, simulated %+v", s, r.res.Calibration, an.Calibration)
		}
		local[s] = e
		sums = sums.Add(ss)
		// The stratified variance: within each site, about its own mean.
		within += ss.SumSq - ss.Sum*ss.Sum/float64(ss.N)
		if r.res.Local.AIPW != e {
			t.Errorf("site %d: AIPW %+v, simulated %+v", s, r.res.Local.AIPW, e)
		}
		if r.res.Global.AIPW != res.GlobalAIPW {
			t.Errorf("site %d: global AIPW %+v, coordinator %+v", s, r.res.Global.AIPW, res.GlobalAIPW)
		}
		if got := len(r.res.Lambda[estimator.Outcome]); got != 3 {
			t.Errorf("site %d: λ row of %d values", s, got)
		}
		if !slices.Equal(r.res.Peers, f.names) {
			t.Errorf("site %d: peers %q, want %q", s, r.res.Peers, f.names)
		}
	}
	g, _ := estimator.GlobalATE(ates, []int{60, 80, 50})
	if math.Abs(g-res.GlobalATE) > 1e-12 {
		t.Errorf("global ATE %g, want %g", res.GlobalATE, g)
	}
	ga := sums.Sum / float64(sums.N)
	gse := math.Sqrt(within / (190 * (190 - 3)))
	if d := max(math.Abs(ga-res.GlobalAIPW.Estimate), math.Abs(gse-res.GlobalAIPW.SE)); d > 1e-9 || res.GlobalAIPW.N != 190 {
		t.Errorf("global AIPW %+v, simulated %v ± %v", res.GlobalAIPW, ga, gse)
	}
	if !(res.GlobalAIPW.SE > 0) || res.GlobalAIPW.SE >= min(local[0].SE, local[1].SE, local[2].SE) {
		t.Errorf("global AIPW se %g, local %g %g %g: pooling rows must narrow it", res.GlobalAIPW.SE, local[0].SE, local[1].SE, local[2].SE)
	}
	for name, a := range f.audits {
		for _, line := range a {
			kind := strings.Fields(line)[1]
			if _, err := wire.ParseKind(kind); err != nil {
				t.Errorf("%s audits unknown kind %q", name, kind)
			}
		}
	}
}

func TestDuplicatedAndStaleEnvelopesAreDropped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newFed(40, 50)
	cfg := testConfig()
	clean, err := estimator.Fit(ctx, f.data, testSchema, estimator.GaussianSpectral{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var last []byte
	f.net.Intercept = func(b []byte) [][]byte {
		mu.Lock()
		defer mu.Unlock()
		out := [][]byte{b, b} // every envelope twice
		if last != nil {
			out = append(out, last) // and the previous one again: stale
		}
		last = b
		return out
	}
	sites := f.start(ctx)
	res, err := RunCoordinator(ctx, f.coordinator(cfg), f.net.Endpoint("coord"))
	if err != nil {
		t.Fatal(err)
	}
	sameModels(t, res, clean.Trained, "differs by %g under duplicates")
	waitSites(t, sites)
}

func TestSchemaMismatchIsRefusedNamingTheColumn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := newFed(30, 30)
	f.cfgs[1].Columns = []string{"b1", "c1", "b2", "age"}
	sites := f.start(ctx)
	_, err := RunCoordinator(ctx, f.coordinator(testConfig()), f.net.Endpoint("coord"))
	if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "site2") || !strings.Contains(err.Error(), "covariate 3") {
		t.Fatalf("coordinator: %v", err)
	}
	if got := FaultySites(err); !slices.Equal(got, []string{"site2"}) {
		t.Errorf("FaultySites: %v, want [site2]", got)
	}
	r := <-sites[1]
	if !errors.Is(r.err, ErrRefused) || !strings.Contains(r.err.Error(), `"age"`) {
		t.Fatalf("site2: %v", r.err)
	}
	if r := <-sites[0]; !errors.Is(r.err, ErrRefused) {
		t.Fatalf("site1: %v", r.err)
	}
}

func TestFrequencyMismatchIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := newFed(30, 30)
	f.cfgs[1].Spectral = shifted{}
	sites := f.start(ctx)
	_, err := RunCoordinator(ctx, f.coordinator(testConfig()), f.net.Endpoint("coord"))
	if !errors.Is(err, ErrFrequencies) || !strings.Contains(err.Error(), "site2") {
		t.Fatalf("coordinator: %v", err)
	}
	if got := FaultySites(err); !slices.Equal(got, []string{"site2"}) {
		t.Errorf("FaultySites: %v, want [site2]", got)
	}
	if r := <-sites[1]; !errors.Is(r.err, ErrFrequencies) {
		t.Fatalf("site2: %v", r.err)
	}
}

// shifted is a kernel that draws other frequencies.
type shifted struct{}

func (shifted) Sample(ctx context.Context, d, D int, seed uint64) (*mat.Dense, error) {
	return estimator.GaussianSpectral{}.Sample(ctx, d, D, seed+1)
}

func TestSilentSiteStopsTheRunNamingIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := newFed(30, 30)
	f.cfgs = f.cfgs[:1] // site2 never runs
	f.start(ctx)
	cc := f.coordinator(testConfig())
	cc.RoundTimeout, cc.Retries = 100*time.Millisecond, 2
	_, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
	if !errors.Is(err, ErrSilent) || !strings.Contains(err.Error(), "site2") || strings.Contains(err.Error(), "site1") {
		t.Fatalf("got %v", err)
	}
	var re *RunError
	if !errors.As(err, &re) || re.RunID != cc.RunID {
		t.Errorf("%v is not a RunError naming run %s", err, cc.RunID)
	}
	if got := FaultySites(err); !slices.Equal(got, []string{"site2"}) {
		t.Errorf("FaultySites: %v, want [site2]", got)
	}
}

func TestDeduplicationKeepsTheFirstListedCopy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newFed(40, 40, 40)
	secret := []byte("sites only")
	for s := range f.cfgs {
		ids := make([]wire.Digest, 40)
		for i := range ids {
			person := fmt.Sprintf("person %d-%d", s, i)
			if i < 5 && s > 0 {
				person = fmt.Sprintf("PERSON   %d-%d ", 0, i) // the same people as site1's first five
			}
			ids[i] = IdentityHMAC(secret, []string{person, "1970-01-01"})
		}
		f.cfgs[s].Identities = ids
	}
	sites := f.start(ctx)
	res, err := RunCoordinator(ctx, f.coordinator(testConfig()), f.net.Endpoint("coord"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 5, 5}; fmt.Sprint(res.Dropped) != fmt.Sprint(want) {
		t.Errorf("dropped %v, want %v", res.Dropped, want)
	}
	if want := []int{40, 35, 35}; fmt.Sprint(res.Rows) != fmt.Sprint(want) {
		t.Errorf("rows %v, want %v", res.Rows, want)
	}
	for s, ch := range sites {
		r := <-ch
		if r.err != nil {
			t.Fatal(r.err)
		}
		if len(r.res.Effects.CATE) != 40 {
			t.Errorf("site %d scored %d rows, want all 40", s, len(r.res.Effects.CATE))
		}
	}
}

// TestModelTrainedLogsTimePerRound checks that the coordinator's line for
// each trained model says how long it took and the mean time per round,
// the figure by which an operator sizes a federation.
func TestModelTrainedLogsTimePerRound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newFed(40, 50)
	cfg := testConfig()
	sites := f.start(ctx)
	var logs logBuffer
	cc := f.coordinator(cfg)
	cc.Logger = logs.logger()
	if _, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord")); err != nil {
		t.Fatal(err)
	}
	waitSites(t, sites)
	perRound := regexp.MustCompile(`msg="model trained" model=(\w+) rounds=(\d+) loss=\S+ took=(\S+) per_round=(\S+)`)
	var models []string
	for _, line := range strings.Split(logs.String(), "\n") {
		m := perRound.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		models = append(models, m[1])
		took, err1 := time.ParseDuration(m[3])
		each, err2 := time.ParseDuration(m[4])
		rounds, _ := strconv.Atoi(m[2])
		if err1 != nil || err2 != nil || each <= 0 || rounds < 1 || rounds > cfg.Rounds {
			t.Errorf("%s: took %q, per round %q, %d rounds: want durations and 1 to %d rounds", m[1], m[3], m[4], rounds, cfg.Rounds)
			continue
		}
		if d := took - each*time.Duration(rounds); d < -time.Millisecond*time.Duration(rounds) || d > time.Millisecond*time.Duration(rounds) {
			t.Errorf("%s: %d rounds of %v do not make %v", m[1], rounds, each, took)
		}
	}
	if strings.Join(models, ",") != "propensity,outcome,latent" {
		t.Errorf("model trained lines for %q, want propensity, outcome and latent; log:\n%s", models, logs.String())
	}
}
