package estimator

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func smallConfig() Config {
	cfg := DefaultConfig()
	cfg.Features = 16
	cfg.Latent = 3
	cfg.Draws = 2
	cfg.Rounds = 40
	cfg.Samples = 20
	cfg.Seed = 42
	return cfg
}

func toySites(m, n int, schema Schema) []*Data {
	rng := rand.New(rand.NewPCG(5, 6))
	sites := make([]*Data, m)
	for s := range sites {
		sites[s] = toyData(rng, n, schema, 0.5*float64(s))
	}
	return sites
}

// TestDeterminism checks that the same seed gives bit-identical CATEs,
// with q sampling and with Metropolis–Hastings, whatever the number of
// sites computed at once.
func TestDeterminism(t *testing.T) {
	schema := Schema{Binary: []bool{true, false, false}}
	sites := toySites(3, 30, schema)
	for _, mh := range []int{0, 3} {
		cfg := smallConfig()
		cfg.MHSteps = mh
		var cates [][]float64
		for _, workers := range []int{1, 3} {
			cfg.Workers = workers
			m, err := Fit(context.Background(), sites, schema, GaussianSpectral{}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			e, err := m.Effects(context.Background(), 0, sites[0])
			if err != nil {
				t.Fatal(err)
			}
			cates = append(cates, append(slices.Clone(e.CATE), e.Lower...))
		}
		if !slices.Equal(cates[0], cates[1]) {
			t.Errorf("MHSteps=%d: reruns differ", mh)
		}
	}
}

// TestEffectsRowIndependent checks that a row's CATE does not depend on the
// other rows scored with it (its draws are keyed by its own index).
func TestEffectsRowIndependent(t *testing.T) {
	schema := Schema{Binary: []bool{true, false, false}}
	sites := toySites(1, 30, schema)
	m, err := Fit(context.Background(), sites, schema, GaussianSpectral{}, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	all, err := m.Effects(context.Background(), 0, sites[0])
	if err != nil {
		t.Fatal(err)
	}
	if all.Lower[0] > all.CATE[0] || all.Upper[0] < all.CATE[0] {
		t.Errorf("interval [%v, %v] excludes the CATE %v", all.Lower[0], all.Upper[0], all.CATE[0])
	}
	first := &Data{X: mat.DenseCopyOf(sites[0].X.Slice(0, 5, 0, 3))}
	part, err := m.Effects(context.Background(), 0, first)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(part.CATE, all.CATE[:5]) {
		t.Errorf("CATEs of the first rows depend on the rows scored with them")
	}
}

// copyInput deep-copies a SiteInput, as serialising it over a network does.
func copyInput(in *SiteInput) *SiteInput {
	c := &SiteInput{Model: in.Model, Round: in.Round, Noise: in.Noise, Weights: map[string]*mat.Dense{}, Shared: map[string][]float64{}}
	for k, w := range in.Weights {
		c.Weights[k] = mat.DenseCopyOf(w)
	}
	for k, v := range in.Shared {
		c.Shared[k] = slices.Clone(v)
	}
	return c
}

func copyOutput(o *SiteOutput) *SiteOutput {
	c := *o
	c.Grads = map[string]*mat.Dense{}
	c.Shared = map[string][]float64{}
	for k, g := range o.Grads {
		c.Grads[k] = mat.DenseCopyOf(g)
	}
	for k, v := range o.Shared {
		c.Shared[k] = slices.Clone(v)
	}
	return &c
}

// TestMessagePassingMatchesTrain runs a federation by exchanging deep copies
// of the messages, with sites rebuilt separately from the setup as daemons
// would, and checks that the model is bit-identical to Train's.
func TestMessagePassingMatchesTrain(t *testing.T) {
	schema := Schema{Binary: []bool{false, true, false}}
	for _, method := range []Method{LBFGS, Adam} {
		cfg := smallConfig()
		cfg.Method = method
		setup, sites, data := toyFederation(t, 3, 12, schema, cfg)
		ctx := context.Background()
		for _, kind := range Kinds {
			c1, _ := NewCoordinator(kind, 3, setup)
			want, err := Train(ctx, c1, sites, 2)
			if err != nil {
				t.Fatal(err)
			}
			remote := make([]*Site, 3)
			for s := range remote {
				remote[s], _ = NewSite(s, data[s], setup)
			}
			c2, _ := NewCoordinator(kind, 3, setup)
			for !c2.Done() {
				ins := c2.Inputs()
				outs := make([]*SiteOutput, 3)
				for s := range 3 {
					o, err := remote[s].Compute(ctx, copyInput(ins[s]))
					if err != nil {
						t.Fatal(err)
					}
					outs[s] = copyOutput(o)
				}
				if _, err := c2.Update(outs); err != nil {
					t.Fatal(err)
				}
			}
			got := c2.Result()
			if got.Rounds != want.Rounds || !sameTrained(got, want) {
				t.Errorf("%v %v: message passing differs from Train", method, kind)
			}
		}
	}
}

func sameTrained(a, b *Trained) bool {
	for s := range a.Weights {
		for k, w := range a.Weights[s] {
			if !mat.Equal(w, b.Weights[s][k]) {
				return false
			}
		}
	}
	for k, v := range a.Shared {
		if !slices.Equal(v, b.Shared[k]) {
			return false
		}
	}
	return mat.Equal(a.Lambda, b.Lambda)
}

// TestCheckpointResume stops a run part-way, resumes a new coordinator from
// the checkpoint and checks that it finishes bit-identically.
func TestCheckpointResume(t *testing.T) {
	schema := Schema{Binary: []bool{false, true, false}}
	for _, method := range []Method{LBFGS, Adam} {
		cfg := smallConfig()
		cfg.Method = method
		setup, sites, _ := toyFederation(t, 2, 15, schema, cfg)
		ctx := context.Background()
		c1, _ := NewCoordinator(Latent, 2, setup)
		want, err := Train(ctx, c1, sites, 1)
		if err != nil {
			t.Fatal(err)
		}
		c2, _ := NewCoordinator(Latent, 2, setup)
		outs := make([]*SiteOutput, 2)
		for c2.Round() < 17 {
			ins := c2.Inputs()
			for s := range sites {
				outs[s], _ = sites[s].Compute(ctx, ins[s])
			}
			if _, err := c2.Update(outs); err != nil {
				t.Fatal(err)
			}
		}
		c3, err := ResumeCoordinator(setup, c2.Checkpoint())
		if err != nil {
			t.Fatal(err)
		}
		got, err := Train(ctx, c3, sites, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got.Rounds != want.Rounds || !sameTrained(got, want) {
			t.Errorf("%v: resumed run differs (rounds %d, want %d)", method, got.Rounds, want.Rounds)
		}
	}
}

// TestTransferModes checks the transfer matrix of each mode.
func TestTransferModes(t *testing.T) {
	schema := Schema{Binary: []bool{true, false, false}}
	for _, tc := range []struct {
		mode Transfer
		want float64 // off-diagonal λ, or −1 for learned
	}{{NoTransfer, 0}, {FullTransfer, 1}, {Learned, -1}} {
		cfg := smallConfig()
		cfg.Transfer = tc.mode
		cfg.Rounds = 10
		m, err := Fit(context.Background(), toySites(3, 12, schema), schema, GaussianSpectral{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		l := m.Latent.Lambda.At(0, 1)
		if tc.want >= 0 && l != tc.want || tc.want < 0 && (l <= 0 || l >= 1) {
			t.Errorf("%v: λ = %v", tc.mode, l)
		}
		if p, err := ParseTransfer(tc.mode.String()); err != nil || p != tc.mode {
			t.Errorf("ParseTransfer(%q) = %v, %v", tc.mode, p, err)
		}
	}
}

func TestMetrics(t *testing.T) {
	for _, tc := range []struct {
		est, truth []float64
		pehe, ate  float64
	}{
		{[]float64{1, 2, 3}, []float64{1, 2, 3}, 0, 0},
		{[]float64{2, 2}, []float64{0, 0}, 2, 2},
		{[]float64{1, -1}, []float64{0, 0}, 1, 0},
	} {
		p, _ := SqrtPEHE(tc.est, tc.truth)
		a, _ := ATEError(tc.est, tc.truth)
		if p != tc.pehe || a != tc.ate {
			t.Errorf("SqrtPEHE, ATEError(%v, %v) = %v, %v, want %v, %v", tc.est, tc.truth, p, a, tc.pehe, tc.ate)
		}
	}
	if g, _ := GlobalATE([]float64{1, 4}, []int{3, 1}); g != 1.75 {
		t.Errorf("GlobalATE = %v, want 1.75", g)
	}
	if _, err := GlobalATE([]float64{1}, []int{0}); err == nil {
		t.Error("GlobalATE of no rows: no error")
	}
	e := &Effects{Y0: []float64{1, 5}, Y1: []float64{4, 2}}
	d := &Data{W: []float64{0, 1}, Y: []float64{2, 0}}
	if sse, n, err := FactualSSE(e, d); sse != 5 || n != 2 || err != nil {
		t.Errorf("FactualSSE = %v, %v, %v, want 5, 2, nil", sse, n, err)
	}
	if _, _, err := FactualSSE(e, &Data{W: []float64{0}, Y: []float64{1}}); err == nil {
		t.Error("FactualSSE of mismatched rows: no error")
	}
	if _, _, err := FactualSSE(&Effects{Y0: []float64{1, 5}, Y1: []float64{4}}, d); err == nil {
		t.Error("FactualSSE with fewer treated than control predictions: no error")
	}
}

// TestUpdateRefusesNonFinite: a site's non-finite loss or gradient stops
// training with an error naming the site and the value, instead of being
// stepped into the weights.
func TestUpdateRefusesNonFinite(t *testing.T) {
	schema := Schema{Binary: []bool{false, true, false}}
	setup, sites, _ := toyFederation(t, 2, 12, schema, smallConfig())
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		spoil func(o *SiteOutput)
		want  string
	}{
		{"infinite loss", func(o *SiteOutput) { o.Loss = math.Inf(1) }, "site 1: loss is +Inf"},
		{"NaN gradient", func(o *SiteOutput) { o.Grads["beta1"].Set(2, 0, math.NaN()) }, `site 1: gradient "beta1"[2,0] is NaN`},
		{"infinite shared gradient", func(o *SiteOutput) { o.Shared["a"][0] = math.Inf(-1) }, `site 1: shared gradient "a"[0] is -Inf`},
	} {
		c, err := NewCoordinator(Outcome, 2, setup)
		if err != nil {
			t.Fatal(err)
		}
		ins := c.Inputs()
		outs := make([]*SiteOutput, 2)
		for s := range outs {
			o, err := sites[s].Compute(ctx, copyInput(ins[s]))
			if err != nil {
				t.Fatal(err)
			}
			outs[s] = copyOutput(o)
		}
		tc.spoil(outs[1])
		if _, err := c.Update(outs); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// TestResumeLBFGS: a checkpoint taken at convergence resumes as done; one
// whose line search cannot restart is an error, not a finished model.
func TestResumeLBFGS(t *testing.T) {
	schema := Schema{Binary: []bool{false, true, false}}
	cfg := smallConfig()
	cfg.Method = LBFGS
	setup, _, _ := toyFederation(t, 2, 12, schema, cfg)
	c, err := NewCoordinator(Outcome, 2, setup)
	if err != nil {
		t.Fatal(err)
	}
	n := len(c.Checkpoint().X)
	vec := func(first float64) []float64 { v := make([]float64, n); v[0] = first; return v }
	base := func(h ...Iterate) *Checkpoint {
		return &Checkpoint{Model: Outcome, Sites: 2, Method: LBFGS, X: h[len(h)-1].X, Round: h[len(h)-1].Round, History: h}
	}

	converged := base(Iterate{X: vec(0.5), Gradient: vec(0), F: 1, Round: 4})
	r, err := ResumeCoordinator(setup, converged)
	if err != nil || !r.Done() {
		t.Errorf("resume at a zero gradient: done %v, %v; want done", r != nil && r.Done(), err)
	}

	// Negative curvature between the two iterates (yᵀs < 0) makes the
	// L-BFGS direction point uphill, so the line search cannot start.
	uphill := base(Iterate{X: vec(0), Gradient: vec(1), F: 2, Round: 3}, Iterate{X: vec(1), Gradient: vec(-1), F: 1, Round: 5})
	if r, err := ResumeCoordinator(setup, uphill); err == nil || !strings.Contains(err.Error(), "resume outcome L-BFGS at round 5") {
		t.Errorf("resume with no descent direction: done %v, %v; want an error", r != nil && r.Done(), err)
	}
}

// TestEffectsWorkers: scoring on one core and on several gives the same
// effects, bit for bit: each chunk of rows is scored on its own.
func TestEffectsWorkers(t *testing.T) {
	schema := Schema{Binary: []bool{true, false, false}}
	sites := toySites(1, 300, schema)
	cfg := smallConfig()
	cfg.Samples = 50
	m, err := Fit(context.Background(), sites, schema, GaussianSpectral{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	one, err := m.Effects(context.Background(), 0, sites[0])
	if err != nil {
		t.Fatal(err)
	}
	runtime.GOMAXPROCS(4)
	four, err := m.Effects(context.Background(), 0, sites[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		a, b []float64
	}{{"CATE", one.CATE, four.CATE}, {"SD", one.SD, four.SD}, {"Lower", one.Lower, four.Lower}, {"Y1", one.Y1, four.Y1}} {
		if !slices.Equal(c.a, c.b) {
			t.Errorf("%s differs between one worker and four", c.name)
		}
	}
}
