package federation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
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
	net    *MemNetwork
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
	for _, k := range estimator.Kinds {
		if d := maxDiff(t, res.Models[k], want.Trained(k)); d != 0 {
			t.Errorf("%s: max abs difference %g, want bit-identical", k, d)
		}
	}
	return want, res, sites
}

func TestEquivalenceWithSimulatedFederation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newFed(60, 80, 50)
	want, res, sites := runEquivalent(ctx, t, f, testConfig())
	ates := make([]float64, len(sites))
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
		if r.res.Global.ATE != res.GlobalATE || r.res.Local.N != f.data[s].Rows() {
			t.Errorf("site %d: global %g (coordinator %g), n %d", s, r.res.Global.ATE, res.GlobalATE, r.res.Local.N)
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
	for _, k := range estimator.Kinds {
		if d := maxDiff(t, res.Models[k], clean.Trained(k)); d != 0 {
			t.Errorf("%s: differs by %g under duplicates", k, d)
		}
	}
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

func TestCoordinatorResumesFromCheckpoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := testConfig()
	ref := newFed(40, 50)
	want, err := estimator.Fit(ctx, ref.data, testSchema, estimator.GaussianSpectral{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, stopAt := range []int{3, 8, 11, 16, 20, 24} {
		t.Run(fmt.Sprint(stopAt), func(t *testing.T) {
			f := newFed(40, 50)
			sites := f.start(ctx)
			cp := &MemCheckpoints{}
			cctx, stop := context.WithCancel(ctx)
			var mu sync.Mutex
			grads := 0
			f.net.Intercept = func(b []byte) [][]byte {
				e, _ := wire.Unmarshal(b)
				if e != nil && e.Kind == wire.KindGradient {
					mu.Lock()
					if grads++; grads == 2*stopAt {
						stop()
					}
					mu.Unlock()
				}
				return [][]byte{b}
			}
			cc := f.coordinator(cfg)
			cc.Checkpoints, cc.CheckpointEvery = cp, 2
			if _, err := RunCoordinator(cctx, cc, f.net.Endpoint("coord")); !errors.Is(err, context.Canceled) {
				t.Fatalf("first coordinator: %v", err)
			}
			if cp.Saves == 0 {
				t.Fatal("no checkpoint saved")
			}
			res, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range estimator.Kinds {
				if d := maxDiff(t, res.Models[k], want.Trained(k)); d != 0 {
					t.Errorf("%s: resumed model differs by %g", k, d)
				}
			}
			waitSites(t, sites)
		})
	}
}

func TestStateDBRoundTrip(t *testing.T) {
	ctx := context.Background()
	db, err := OpenStateDB(ctx, t.TempDir()+"/coord.sqlite", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if st, err := db.Load(ctx); err != nil || st != nil {
		t.Fatalf("empty: %v %v", st, err)
	}
	tr := &estimator.Trained{Model: estimator.Outcome, Weights: []map[string]*mat.Dense{{"b": mat.NewDense(1, 2, []float64{0.1, -1e-300})}},
		Shared: map[string][]float64{"a": {math.Pi}}, Lambda: mat.NewSymDense(1, []float64{1}), Rounds: 3, Loss: 2.5}
	st := &State{RunID: "r", Sites: []string{"a"}, Step: 9, Trained: []*estimator.Trained{tr},
		Checkpoint: &estimator.Checkpoint{X: []float64{1.0 / 3}},
		Finish:     &FinishState{LocalATE: []float64{0.1}, LocalSE: []float64{1e-17}, Rows: []int{7}, Done: []bool{true}}}
	if err := db.Save(ctx, st); err != nil {
		t.Fatal(err)
	}
	got, err := db.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Step != 9 || got.Checkpoint.X[0] != 1.0/3 || got.Trained[0].Weights[0]["b"].At(0, 1) != -1e-300 || got.Trained[0].Shared["a"][0] != math.Pi {
		t.Fatalf("round trip: %+v", got)
	}
	if f := got.Finish; f == nil || f.LocalATE[0] != 0.1 || f.LocalSE[0] != 1e-17 || f.Rows[0] != 7 || !f.Done[0] {
		t.Fatalf("round trip of the finish phase: %+v", got.Finish)
	}
	if err := db.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := db.Load(ctx); st != nil {
		t.Fatal("state after Clear")
	}
}

func TestRestartedSiteRejoins(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newFed(40, 50, 30)
	cfg := testConfig()
	want, err := estimator.Fit(ctx, f.data, testSchema, estimator.GaussianSpectral{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, stopAt := range []int{2, 15, 24} {
		t.Run(fmt.Sprint(stopAt), func(t *testing.T) {
			f := newFed(40, 50, 30)
			var sites []chan siteRun
			others := f.cfgs
			f.cfgs = []SiteConfig{others[0], others[2]}
			sites = f.start(ctx)
			f.cfgs = others
			site2ctx, kill := context.WithCancel(ctx)
			var mu sync.Mutex
			n := 0
			f.net.Intercept = func(b []byte) [][]byte {
				e, _ := wire.Unmarshal(b)
				if e != nil && e.Kind == wire.KindGradient && e.Sender == "site2" {
					mu.Lock()
					if n++; n == stopAt {
						kill()
					}
					mu.Unlock()
				}
				return [][]byte{b}
			}
			second := f.restartSite(site2ctx, ctx, 1, f.cfgs[1], nil)
			cc := f.coordinator(cfg)
			cc.RoundTimeout, cc.Retries = 500*time.Millisecond, 5
			var logs strings.Builder
			var lmu sync.Mutex
			cc.Logger = slog.New(slog.NewTextHandler(lockedWriter{&lmu, &logs}, nil))
			res, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
			if err != nil {
				t.Fatal(err)
			}
			lmu.Lock()
			if !strings.Contains(logs.String(), "site rejoins the run") {
				t.Error("site2 never rejoined")
			}
			if strings.Contains(logs.String(), "value") {
				t.Error("log mentions values")
			}
			lmu.Unlock()
			for _, k := range estimator.Kinds {
				if d := maxDiff(t, res.Models[k], want.Trained(k)); d != 0 {
					t.Errorf("%s: differs by %g after site2 restarted", k, d)
				}
			}
			if r := <-second; r.err != nil || r.res.Global.ATE != res.GlobalATE {
				t.Fatalf("restarted site2: %v", r.err)
			}
			waitSites(t, sites)
		})
	}
}

// TestSiteRestartedTwiceInOneStepRejoins restarts site2 twice within one
// step: its second process dies after asking to rejoin, before it hears the
// coordinator's answer, and its third asks again at the same step. Each
// process knows nothing of the one before, so the third's request must not
// be taken for a duplicate of the second's; the run must end with the
// uninterrupted run's models. site2's first process dies after sending
// gradient number stopAt, before it hears the next step: 2 puts the two
// restarts in a training step, 24 (its last gradient) in the step of the
// final weights.
func TestSiteRestartedTwiceInOneStepRejoins(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := testConfig()
	sizes := []int{40, 50, 30}
	want, _ := referenceRun(ctx, t, cfg, sizes...)
	for _, stopAt := range []int{2, 24} {
		t.Run(fmt.Sprint(stopAt), func(t *testing.T) {
			f := newFed(sizes...)
			others := f.cfgs
			f.cfgs = []SiteConfig{others[0], others[2]}
			sites := f.start(ctx)
			f.cfgs = others
			// lives[i] is the context of site2's process i+1, of the
			// three; the third runs under ctx.
			lives := make([]context.Context, 2)
			kills := make([]context.CancelFunc, 2)
			for i := range lives {
				lives[i], kills[i] = context.WithCancel(ctx)
				defer kills[i]()
			}
			// lost[i] is closed once the envelopes the coordinator sent
			// process i+1 after its death, up to and including the step's
			// weights, are lost: its successor starts then, so that it
			// hears nothing before the coordinator sends the step again.
			lost := []chan struct{}{make(chan struct{}), make(chan struct{})}
			var mu sync.Mutex
			// life is the index of site2's running process; doomed says
			// it dies on the next envelope the coordinator sends it, and
			// dying that it is dead and not yet replaced.
			life, grads, doomed, dying, closed := 0, 0, false, false, false
			f.net.Intercept = func(b []byte) [][]byte {
				e, err := wire.Unmarshal(b)
				if err != nil {
					return [][]byte{b}
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case e.Recipient == "site2" && (doomed || dying):
					if doomed {
						doomed, dying = false, true
						kills[life]()
					}
					if e.Kind == wire.KindWeights && !closed {
						closed = true
						close(lost[life])
					}
					return nil
				case life == 0 && e.Sender == "site2" && e.Kind == wire.KindGradient:
					grads++
					doomed = grads == stopAt
				case life == 1 && e.Sender == "site2" && e.Kind == wire.KindHello:
					// The second process asks to rejoin; it dies
					// before it hears the answer.
					_, doomed = e.Tensor(tRejoin)
				}
				return [][]byte{b}
			}
			next := func() {
				mu.Lock()
				defer mu.Unlock()
				life++
				dying, closed = false, false
			}
			third := make(chan siteRun, 1)
			go func() {
				for i, l := range lives {
					_, _ = RunSite(l, f.cfgs[1], f.net.Endpoint("site2"))
					<-lost[i]
					next()
				}
				r, err := RunSite(ctx, f.cfgs[1], f.net.Endpoint("site2"))
				third <- siteRun{r, err}
			}()
			cc := f.coordinator(cfg)
			cc.RoundTimeout, cc.Retries = 500*time.Millisecond, 5
			var logs strings.Builder
			var lmu sync.Mutex
			cc.Logger = slog.New(slog.NewTextHandler(lockedWriter{&lmu, &logs}, nil))
			res, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			if life != 2 {
				t.Errorf("site2 ran %d processes before the last, want 2", life)
			}
			mu.Unlock()
			lmu.Lock()
			if n := strings.Count(logs.String(), "site rejoins the run"); n < 2 {
				t.Errorf("site2 rejoined %d times, want at least twice", n)
			}
			if strings.Contains(logs.String(), "value") {
				t.Error("log mentions values")
			}
			lmu.Unlock()
			for _, k := range estimator.Kinds {
				if d := maxDiff(t, res.Models[k], want.Models[k]); d != 0 {
					t.Errorf("%s: differs by %g after site2 restarted twice", k, d)
				}
			}
			if res.GlobalATE != want.GlobalATE || !slices.Equal(res.LocalATE, want.LocalATE) {
				t.Errorf("global ATE %v, local %v; uninterrupted %v, %v", res.GlobalATE, res.LocalATE, want.GlobalATE, want.LocalATE)
			}
			if r := <-third; r.err != nil || r.res.Global.ATE != res.GlobalATE {
				t.Fatalf("site2's third process: %v", r.err)
			}
			waitSites(t, sites)
		})
	}
}

// TestRejoinHelloChecksTheRowCount hands a site the hello a coordinator
// sends when the site rejoins a run under way, which names the rows the
// site had when the run began. A site with other rows must stop with
// ErrRowsChanged naming itself and the counts, and a site with as many
// must not answer: the coordinator has the handshake's moments and hashes
// already, and fresh ones of edited rows would tell it the edit. A hello
// without the count (from a coordinator that predates it) is answered as
// before.
func TestRejoinHelloChecksTheRowCount(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name  string
		began int // the count in the hello; negative for none
		sends int // envelopes the site answers with
		err   string
	}{
		{"no count", -1, 2, ""},
		{"same rows", 50, 0, ""},
		{"rows added", 48, 0, "site2's table holds 50 rows, the run began with 48"},
		{"rows deleted", 53, 0, "site2's table holds 50 rows, the run began with 53"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent := 0
			cfg := SiteConfig{Name: "site2", Coordinator: "coord", Data: makeData(50, 1), Schema: testSchema,
				Columns: testColumns, Spectral: estimator.GaussianSpectral{},
				Audit: func(_ context.Context, d Direction, _ *wire.Envelope) error {
					if d == Sent {
						sent++
					}
					return nil
				}}
			s := &site{cfg: cfg, conn: NewMemNetwork().Endpoint("site2"), log: slog.New(slog.DiscardHandler)}
			ts := append(configTensors(testConfig()), wire.Scalar(tSiteIndex, 1), wire.Scalar(tSiteCount, 3))
			if tc.began >= 0 {
				ts = append(ts, wire.Scalar(tSiteRows, float64(tc.began)))
			}
			e, err := wire.New(wire.Header{RunID: "run-1", Round: 9, Kind: wire.KindHello, Sender: "coord", Recipient: "site2"}, ts)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.handle(ctx, e)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("hello: %v", err)
			case tc.err != "" && (!errors.Is(err, ErrRowsChanged) || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("hello: %v, want %v saying %q", err, ErrRowsChanged, tc.err)
			}
			if sent != tc.sends {
				t.Errorf("the site answered with %d envelopes, want %d", sent, tc.sends)
			}
		})
	}
}

// TestRestartedSiteWithChangedRowsStops restarts site2 mid-run on a table
// with rows added or deleted since the run began. The restarted site must
// stop with ErrRowsChanged naming itself and the counts, and send nothing
// computed from its rows; the coordinator, without site2's gradient, stops
// with ErrSilent naming it. No row value may reach a log or the error.
func TestRestartedSiteWithChangedRowsStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name string
		rows int // site2's rows after the restart; 50 before
	}{{"rows added", 52}, {"rows deleted", 47}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFed(40, 50, 30)
			var logs strings.Builder
			var lmu sync.Mutex
			logger := slog.New(slog.NewTextHandler(lockedWriter{&lmu, &logs}, nil))
			f.cfgs[1].Logger = logger
			again := f.cfgs[1]
			// makeData draws the same rows first, so these are the first
			// life's rows with rows added at the end or the last deleted.
			again.Data = makeData(tc.rows, 1)
			others := f.cfgs
			f.cfgs = []SiteConfig{others[0], others[2]}
			sites := f.start(ctx)
			f.cfgs = others
			site2ctx, kill := context.WithCancel(ctx)
			defer kill()
			var mu sync.Mutex
			n, gone := 0, false
			var after []string // what site2's second process sent
			f.net.Intercept = func(b []byte) [][]byte {
				e, _ := wire.Unmarshal(b)
				if e == nil || e.Sender != "site2" {
					return [][]byte{b}
				}
				mu.Lock()
				defer mu.Unlock()
				if _, rejoin := e.Tensor(tRejoin); gone && !rejoin {
					after = append(after, e.Kind.String())
				}
				if e.Kind == wire.KindGradient {
					if n++; n == 2 {
						kill()
					}
				}
				return [][]byte{b}
			}
			second := f.restartSite(site2ctx, ctx, 1, again, func() {
				mu.Lock()
				gone = true
				mu.Unlock()
			})
			cc := f.coordinator(testConfig())
			cc.RoundTimeout, cc.Retries = 300*time.Millisecond, 3
			cc.Logger = logger
			_, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
			if !errors.Is(err, ErrSilent) || !strings.Contains(err.Error(), "site2") {
				t.Errorf("coordinator: %v, want %v naming site2", err, ErrSilent)
			}
			r := <-second
			want := fmt.Sprintf("site2's table holds %d rows, the run began with 50", tc.rows)
			if !errors.Is(r.err, ErrRowsChanged) || !strings.Contains(r.err.Error(), want) {
				t.Errorf("restarted site2: %v, want %v saying %q", r.err, ErrRowsChanged, want)
			}
			mu.Lock()
			if len(after) > 0 {
				t.Errorf("restarted site2 sent %v besides its request to rejoin", after)
			}
			mu.Unlock()
			lmu.Lock()
			text := logs.String()
			lmu.Unlock()
			if r.err != nil {
				text += r.err.Error()
			}
			if strings.Contains(text, "value") {
				t.Error("log mentions values")
			}
			for _, d := range []*estimator.Data{f.data[1], again.Data} {
				for _, v := range slices.Concat(d.X.RawMatrix().Data, d.Y) {
					if v != math.Trunc(v) && strings.Contains(text, strconv.FormatFloat(v, 'g', -1, 64)) {
						t.Fatalf("a row value of site2 (%v) is in the log or the error", v)
					}
				}
			}
			for _, ch := range sites {
				if r := <-ch; !errors.Is(r.err, ErrRefused) {
					t.Errorf("other site: %v, want %v", r.err, ErrRefused)
				}
			}
		})
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// hookCheckpoints calls saved with every state it has stored.
type hookCheckpoints struct {
	MemCheckpoints
	saved func(st *State)
}

func (h *hookCheckpoints) Save(ctx context.Context, st *State) error {
	if err := h.MemCheckpoints.Save(ctx, st); err != nil {
		return err
	}
	h.saved(st)
	return nil
}

func TestCoordinatorResumesAtModelBoundary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := testConfig()
	ref := newFed(40, 50)
	want, err := estimator.Fit(ctx, ref.data, testSchema, estimator.GaussianSpectral{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for kind := 1; kind <= len(estimator.Kinds); kind++ {
		t.Run(fmt.Sprint(kind), func(t *testing.T) {
			f := newFed(40, 50)
			sites := f.start(ctx)
			cctx, stop := context.WithCancel(ctx)
			// Stop right after the save at the end of model number kind.
			cp := &hookCheckpoints{saved: func(st *State) {
				if st.Checkpoint == nil && len(st.Trained) == kind {
					stop()
				}
			}}
			cc := f.coordinator(cfg)
			cc.Checkpoints, cc.CheckpointEvery = cp, 100
			if _, err := RunCoordinator(cctx, cc, f.net.Endpoint("coord")); !errors.Is(err, context.Canceled) {
				t.Fatalf("first coordinator: %v", err)
			}
			res, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range estimator.Kinds {
				if d := maxDiff(t, res.Models[k], want.Trained(k)); d != 0 {
					t.Errorf("%s: resumed model differs by %g", k, d)
				}
			}
			waitSites(t, sites)
		})
	}
}

// TestCoordinatorResumesInFinish stops the coordinator in the finish phase,
// after the first done sites confirmed the run and left (as sites started
// with --once do) while the others never heard the global ATE, and resumes
// it. The resumed coordinator must send nothing to the sites that left, ask
// no site for its ATE again, and end with the uninterrupted run's result.
func TestCoordinatorResumesInFinish(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := testConfig()
	sizes := []int{40, 50, 30}
	want, _ := referenceRun(ctx, t, cfg, sizes...)
	for _, done := range []int{0, 1, 2} {
		t.Run(fmt.Sprint(done), func(t *testing.T) {
			f := newFed(sizes...)
			cctx, stop := context.WithCancel(ctx)
			defer stop()
			held := func(site string) bool { return slices.Index(f.names, site) >= done }
			var mu sync.Mutex
			resumed := false
			ates, saves, resent := 0, 0, 0
			sentAfter := map[string][]wire.Kind{} // by recipient, once resumed
			f.net.Intercept = func(b []byte) [][]byte {
				e, err := wire.Unmarshal(b)
				if err != nil {
					return [][]byte{b}
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case resumed:
					if e.Sender == "coord" {
						sentAfter[e.Recipient] = append(sentAfter[e.Recipient], e.Kind)
					}
				case e.Kind == wire.KindATE:
					ates++
				case e.Kind == wire.KindGlobalATE && held(e.Recipient):
					// The held sites stay in the run, waiting for the
					// global ATE. A coordinator that sends it again
					// saved nothing when the done arrived: stop it
					// anyway, to show what its resumption does.
					if resent++; resent > len(sizes)-done {
						stop()
					}
					return nil
				}
				return [][]byte{b}
			}
			cp := &hookCheckpoints{}
			cp.saved = func(*State) {
				mu.Lock()
				defer mu.Unlock()
				// Once every ATE is in: the save of the ATEs, then one
				// per confirmed site.
				if ates == len(sizes) {
					if saves++; saves == 1+done {
						stop()
					}
				}
			}
			sites := f.start(ctx)
			cc := f.coordinator(cfg)
			cc.Checkpoints, cc.CheckpointEvery = cp, 2
			cc.RoundTimeout, cc.Retries = 2*time.Second, 2
			if _, err := RunCoordinator(cctx, cc, f.net.Endpoint("coord")); !errors.Is(err, context.Canceled) {
				t.Fatalf("first coordinator: %v", err)
			}
			for s := range done {
				r := <-sites[s] // the site has left
				if r.err != nil || r.res.Global.ATE != want.GlobalATE {
					t.Fatalf("%s before the stop: %v", f.names[s], r.err)
				}
			}
			mu.Lock()
			resumed = true
			mu.Unlock()
			res, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
			if err != nil {
				t.Fatalf("resumed coordinator: %v", err)
			}
			if res.GlobalATE != want.GlobalATE || res.GlobalSE != want.GlobalSE || !slices.Equal(res.LocalATE, want.LocalATE) ||
				!slices.Equal(res.LocalSE, want.LocalSE) || !slices.Equal(res.Rows, want.Rows) {
				t.Errorf("resumed result %+v, uninterrupted %+v", res, want)
			}
			for _, k := range estimator.Kinds {
				if d := maxDiff(t, res.Models[k], want.Models[k]); d != 0 {
					t.Errorf("%s: resumed model differs by %g", k, d)
				}
			}
			for s := done; s < len(sizes); s++ {
				if r := <-sites[s]; r.err != nil || r.res.Global.ATE != want.GlobalATE {
					t.Errorf("%s after the resumption: %v", f.names[s], r.err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, name := range f.names {
				var kinds []wire.Kind
				if held(name) {
					kinds = []wire.Kind{wire.KindGlobalATE}
				}
				if !slices.Equal(sentAfter[name], kinds) {
					t.Errorf("resumed coordinator sent %s %v, want %v", name, sentAfter[name], kinds)
				}
			}
			if st, err := cp.Load(ctx); st != nil || err != nil {
				t.Errorf("checkpoint after the run: %v, %v", st, err)
			}
		})
	}
}

// TestSiteRejoinsAtTheGlobalATE restarts site2 in the last step of a run,
// before it hears the global ATE: once while the coordinator waits for the
// sites' done, and once while the coordinator is down after saving the
// local ATEs (State.Finish), so that the resumed coordinator meets the
// restarted site. The new process knows nothing of the run, not even its
// final weights; it must still publish what an uninterrupted run's site2
// publishes.
func TestSiteRejoinsAtTheGlobalATE(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := testConfig()
	sizes := []int{40, 50, 30}
	want, refSites := referenceRun(ctx, t, cfg, sizes...)
	want2 := refSites[1]
	for _, coordDown := range []bool{false, true} {
		t.Run(fmt.Sprintf("coordinator down %v", coordDown), func(t *testing.T) {
			f := newFed(sizes...)
			others := f.cfgs
			f.cfgs = []SiteConfig{others[0], others[2]}
			sites := f.start(ctx)
			f.cfgs = others
			site2ctx, kill := context.WithCancel(ctx)
			defer kill()
			cctx, stop := context.WithCancel(ctx)
			defer stop()
			var mu sync.Mutex
			killed, gone, down := false, false, false
			var published []*SiteResult // by site2's second process
			f.net.Intercept = func(b []byte) [][]byte {
				e, err := wire.Unmarshal(b)
				if err != nil {
					return [][]byte{b}
				}
				mu.Lock()
				defer mu.Unlock()
				if down && e.Sender == "coord" {
					// What a stopping coordinator still sends is lost:
					// the sites must hear the global ATE from the
					// resumed one.
					return nil
				}
				if e.Recipient != "site2" {
					return [][]byte{b}
				}
				if !coordDown && !killed && e.Kind == wire.KindGlobalATE {
					killed = true
					kill()
				}
				if killed && !gone {
					return nil // lost with the killed process; the coordinator sends it again
				}
				return [][]byte{b}
			}
			c := f.cfgs[1]
			c.Publish = func(_ context.Context, r *SiteResult) error {
				mu.Lock()
				defer mu.Unlock()
				published = append(published, r)
				return nil
			}
			second := f.restartSite(site2ctx, ctx, 1, c, func() {
				mu.Lock()
				gone = true
				mu.Unlock()
			})
			cc := f.coordinator(cfg)
			cc.RoundTimeout, cc.Retries = 500*time.Millisecond, 5
			var logs strings.Builder
			var lmu sync.Mutex
			cc.Logger = slog.New(slog.NewTextHandler(lockedWriter{&lmu, &logs}, nil))
			if coordDown {
				cp := &hookCheckpoints{}
				cp.saved = func(*State) {
					// Stop the coordinator, and kill site2, once the
					// local ATEs are saved.
					st, err := cp.Load(ctx)
					if err != nil || st == nil || st.Finish == nil {
						return
					}
					mu.Lock()
					defer mu.Unlock()
					if !killed {
						killed, down = true, true
						kill()
						stop()
					}
				}
				cc.Checkpoints, cc.CheckpointEvery = cp, 2
				if _, err := RunCoordinator(cctx, cc, f.net.Endpoint("coord")); !errors.Is(err, context.Canceled) {
					t.Fatalf("first coordinator: %v", err)
				}
				mu.Lock()
				down = false
				mu.Unlock()
			}
			res, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
			if err != nil {
				select {
				case r := <-second:
					t.Fatalf("coordinator: %v; restarted site2: %v", err, r.err)
				case <-time.After(time.Second):
					t.Fatalf("coordinator: %v", err)
				}
			}
			lmu.Lock()
			if !strings.Contains(logs.String(), "site rejoins the run") {
				t.Error("site2 never rejoined")
			}
			if strings.Contains(logs.String(), "value") {
				t.Error("log mentions values")
			}
			if !strings.Contains(logs.String(), "local ATE matches the recorded one") {
				t.Error("the rejoined site's local ATE was not checked")
			}
			if strings.Contains(logs.String(), "differs") {
				t.Errorf("the rejoined site's local ATE differs from the recorded one:\n%s", logs.String())
			}
			lmu.Unlock()
			if res.GlobalATE != want.GlobalATE || res.GlobalSE != want.GlobalSE || !slices.Equal(res.LocalATE, want.LocalATE) {
				t.Errorf("result %+v, uninterrupted %+v", res, want)
			}
			r := <-second
			if r.err != nil {
				t.Fatalf("restarted site2: %v", r.err)
			}
			got := r.res
			if got.Global != want2.Global || got.Local != want2.Local || !slices.Equal(got.Kept, want2.Kept) ||
				!slices.Equal(got.Peers, want2.Peers) || got.Index != want2.Index {
				t.Errorf("restarted site2: global %+v local %+v, uninterrupted global %+v local %+v", got.Global, got.Local, want2.Global, want2.Local)
			}
			for _, k := range estimator.Kinds {
				if !slices.Equal(got.Lambda[k], want2.Lambda[k]) || got.Rounds[k] != want2.Rounds[k] {
					t.Errorf("restarted site2, %s: λ %v after %d rounds, uninterrupted %v after %d", k, got.Lambda[k], got.Rounds[k], want2.Lambda[k], want2.Rounds[k])
				}
			}
			ge, we := got.Effects, want2.Effects
			for name, p := range map[string][2][]float64{"cate": {ge.CATE, we.CATE}, "sd": {ge.SD, we.SD}, "lower": {ge.Lower, we.Lower},
				"upper": {ge.Upper, we.Upper}, "y0": {ge.Y0, we.Y0}, "y1": {ge.Y1, we.Y1}, "propensity": {ge.Propensity, we.Propensity}} {
				if !slices.Equal(p[0], p[1]) {
					t.Errorf("restarted site2: %s differs from the uninterrupted run's", name)
				}
			}
			mu.Lock()
			if len(published) != 1 || published[0] != got {
				t.Errorf("restarted site2 published %d times, want once", len(published))
			}
			mu.Unlock()
			for _, ch := range sites {
				if r := <-ch; r.err != nil || r.res.Global.ATE != want.GlobalATE {
					t.Fatalf("other site: %v", r.err)
				}
			}
		})
	}
}

// TestRecheckATELogsADifferenceWithoutValues checks what the coordinator
// logs when a site that rejoined at the global-ate step answers a local ATE
// other than the one recorded: a warning naming the site, no value.
func TestRecheckATELogsADifferenceWithoutValues(t *testing.T) {
	var logs strings.Builder
	c := &coordinator{cfg: CoordinatorConfig{Name: "coord", RunID: "run-1", Sites: []string{"site1", "site2"}},
		log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{} // its digits could look like a value
			}
			return a
		}})),
		st: &State{RunID: "run-1", Finish: &FinishState{LocalATE: []float64{0.25, 1.5}, LocalSE: []float64{0.125, 0.375},
			Rows: []int{40, 50}, Done: []bool{true, false}}}}
	for _, tc := range []struct {
		ate  float64
		n    float64
		want string
	}{{1.5, 50, "matches"}, {1.75, 50, "differs"}, {1.5, 49, "differs"}} {
		logs.Reset()
		e, err := wire.New(wire.Header{RunID: "run-1", Round: 30, Kind: wire.KindATE, Sender: "site2", Recipient: "coord"},
			[]wire.Tensor{wire.Scalar(tATE, tc.ate), wire.Scalar(tSE, 0.375), wire.Scalar(tN, tc.n)})
		if err != nil {
			t.Fatal(err)
		}
		c.recheckATE(1, e)
		got := logs.String()
		if !strings.Contains(got, tc.want) || !strings.Contains(got, "site=site2") {
			t.Errorf("ATE %v over %v rows: logged %q, want it to say %q naming site2", tc.ate, tc.n, got, tc.want)
		}
		for _, v := range []string{"1.5", "1.75", "0.375", "49", "50"} {
			if strings.Contains(got, v) {
				t.Errorf("log %q holds the value %s", got, v)
			}
		}
	}
}
