package federation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/selection"
)

// This file holds the tests of what a hostile peer can send: a coordinator
// that sends a site counts beyond its limits, sites that send a
// coordinator counts beyond the protocol's, and a checkpoint whose counts
// do not fit the coordinator resuming it. The fuzz targets of fuzz_test.go
// use its mock coordinator.

// transported returns e as its recipient reads it: encoded and decoded.
func transported(e *wire.Envelope) (*wire.Envelope, error) {
	b, err := e.Marshal()
	if err != nil {
		return nil, err
	}
	return wire.Unmarshal(b)
}

// scriptConn is a Conn whose inbox holds a script of envelopes and is then
// closed, and which records what is sent over it. Every envelope is
// encoded and decoded on its way, as over a transport.
type scriptConn struct {
	in   chan *wire.Envelope
	mu   sync.Mutex
	sent []*wire.Envelope
}

// newScriptConn returns a Conn whose inbox delivers script and ends.
func newScriptConn(script []*wire.Envelope) (*scriptConn, error) {
	c := &scriptConn{in: make(chan *wire.Envelope, len(script))}
	for _, e := range script {
		d, err := transported(e)
		if err != nil {
			return nil, err
		}
		c.in <- d
	}
	close(c.in)
	return c, nil
}

func (c *scriptConn) Send(_ context.Context, e *wire.Envelope) error {
	d, err := transported(e)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, d)
	return nil
}

func (c *scriptConn) Inbox() <-chan *wire.Envelope { return c.in }

func (c *scriptConn) envelopes() []*wire.Envelope {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sent)
}

// mockCoordinator builds what a coordinator sends site 0 of a run, with
// the package's own encoders (helloFor, verdictFor, weightsFor,
// finalWeightsFor, …) at the steps a test chooses, so that a test can
// send a site any sequence of them, edited as it likes.
type mockCoordinator struct {
	c *coordinator
}

// newMockCoordinator returns the coordinator of a run of cfg over sites,
// whose site 0 has the rows d (its scaler is theirs alone), choosing among
// the further kernels extra when sel is on. Every model of every kernel is
// at its initial point, as the final weights send it.
func newMockCoordinator(ctx context.Context, cfg estimator.Config, sites []string, d *estimator.Data, sel Selection, extra []selection.Kernel) (*mockCoordinator, error) {
	scaler, err := estimator.NewScaler(testSchema, []estimator.Moments{d.Moments()})
	if err != nil {
		return nil, err
	}
	c := &coordinator{cfg: CoordinatorConfig{Name: "coord", RunID: "run-1", Sites: sites, Config: cfg, Spectral: estimator.GaussianSpectral{},
		KernelName: sel.Kernel, Selection: sel, Extra: extra}, index: map[string]int{}}
	c.st = &State{RunID: "run-1", Sites: sites, Config: cfg, Schema: testSchema, Scaler: scaler, Select: sel, Kernels: extraNames(extra)}
	if c.setups, err = setupsFor(ctx, testSchema, c.spectra(), cfg, c.points(), scaler); err != nil {
		return nil, err
	}
	for _, setup := range c.setups {
		for _, kind := range estimator.Kinds {
			co, err := estimator.NewCoordinator(kind, len(sites), setup)
			if err != nil {
				return nil, err
			}
			c.st.Trained = append(c.st.Trained, co.Result())
		}
	}
	c.st.Kind = len(c.st.Trained)
	return &mockCoordinator{c: c}, nil
}

// at sets the step the next envelope is sent at.
func (m *mockCoordinator) at(step uint64) *coordinator {
	m.c.step = step
	return m.c
}

// hello is the run's hello to site 0.
func (m *mockCoordinator) hello(step uint64) (*wire.Envelope, error) { return m.at(step).helloFor(0) }

// verdict is a dedup-verdict that leaves out the rows at drop.
func (m *mockCoordinator) verdict(step uint64, drop []int) (*wire.Envelope, error) {
	m.c.st.Drop = [][]int{drop}
	return m.at(step).verdictFor(0)
}

// weights is a training round of model kind of kernel k, at the model's
// initial point.
func (m *mockCoordinator) weights(step uint64, kind estimator.Kind, k int) (*wire.Envelope, error) {
	co, err := estimator.NewCoordinator(kind, len(m.c.cfg.Sites), m.c.setups[min(k, len(m.c.setups)-1)])
	if err != nil {
		return nil, err
	}
	return m.at(step).weightsFor(0, modelName(kind, k), co.Inputs()[0])
}

// final is the final weights with the tensors extra, or with sel's choice
// when sel is scored and extra is empty.
func (m *mockCoordinator) final(step uint64, sel *SelectState, extra ...wire.Tensor) (*wire.Envelope, error) {
	m.c.st.Selected = sel
	defer func() { m.c.st.Selected = nil }()
	return m.at(step).finalWeightsFor(0, extra...)
}

// stats asks for model selection's statistics.
func (m *mockCoordinator) stats(step uint64) (*wire.Envelope, error) {
	return m.final(step, nil, wire.Scalar(tSelectStage, 1), wire.Scalar(tSelectDR, 1))
}

// losses asks for the held-out losses of sel's candidates.
func (m *mockCoordinator) losses(step uint64, sel *SelectState) (*wire.Envelope, error) {
	return m.final(step, nil, sel.lossTensors()...)
}

// global is a global-ate of n rows, with the extra tensors.
func (m *mockCoordinator) global(step uint64, n int, extra ...wire.Tensor) (*wire.Envelope, error) {
	g := inference.ATEs{PlugIn: inference.PointEstimate(1, n), AIPW: inference.Estimate{Estimate: 1, SE: 0.1, Lower: 0.8, Upper: 1.2, N: n}}
	ts := append(append(globalTensors(g), wire.Scalar(tPrivateSites, 0)), extra...)
	return m.at(step).envelope(m.c.cfg.Sites[0], "", wire.KindGlobalATE, ts)
}

// done is a done of status.
func (m *mockCoordinator) done(step uint64, status float64) (*wire.Envelope, error) {
	return m.at(step).envelope(m.c.cfg.Sites[0], "", wire.KindDone, []wire.Tensor{wire.Scalar(tStatus, status)})
}

// features is the reference model's outcome feature count, which the
// ridge candidates' coefficients have.
func (m *mockCoordinator) features() int {
	return (&estimator.Model{Setup: m.c.setups[0]}).OutcomeFeatureCount()
}

// mockSelection is a scored model selection of the latent and outcome
// candidates of every one of kernels (its names), a T-learner and a
// DR-learner of each penalty in ridge with p coefficients, and, when
// members are given, their ensemble, chosen; otherwise candidate chosen.
func mockSelection(kernels []string, ridge []float64, p int, members []int, chosen int) *SelectState {
	st := &SelectState{Scored: true, Chosen: chosen, Held: 10}
	st.Candidates, st.Estimators = selection.KernelCandidates(kernels, nil)
	for _, l := range ridge {
		arms := [2]estimator.Ridge{{Beta: make([]float64, p)}, {Beta: make([]float64, p)}}
		st.Candidates = append(st.Candidates, selection.Candidate{Name: selection.CandidateName(selection.KindTLearner, "", l), Kind: selection.KindTLearner, Ridge: l},
			selection.Candidate{Name: selection.CandidateName(selection.KindDR, "", l), Kind: selection.KindDR, Ridge: l})
		st.Estimators = append(st.Estimators, selection.Estimator{Kind: selection.KindTLearner, Ridge: l, Arms: &arms},
			selection.Estimator{Kind: selection.KindDR, Ridge: l, DR: &estimator.Ridge{Beta: make([]float64, p)}})
	}
	if len(members) == 0 {
		return st
	}
	// Members out of range are left out, so that the coordinator's side
	// encodes (the site sees such members through hostileTensors).
	ens := selection.Estimator{Kind: selection.KindEnsemble}
	var kept []int
	for _, i := range members {
		if i < 0 || i >= len(st.Candidates) {
			continue
		}
		st.Candidates[i].Member = true
		ens.Members = append(ens.Members, selection.Member{Estimator: st.Estimators[i], Kernel: st.Candidates[i].Kernel, Candidate: i})
		kept = append(kept, i)
	}
	st.Candidates = append(st.Candidates, selection.Candidate{Name: selection.KindEnsemble, Kind: selection.KindEnsemble})
	st.Estimators = append(st.Estimators, ens)
	st.Chosen = len(st.Candidates) - 1
	st.Ensemble = selection.Ensemble{Members: kept, Sites: []selection.Centring{{Shift: 0.25}}}
	return st
}

// edited returns e with its tensors as edit leaves them, resealed, or
// the error of an envelope package wire refuses (a NaN, a bad shape).
func edited(e *wire.Envelope, edit func([]wire.Tensor) []wire.Tensor) (*wire.Envelope, error) {
	return wire.New(e.Header, edit(slices.Clone(e.Tensors())), e.DigestLists()...)
}

// setTensor returns ts with the tensor of t's name replaced by t, or t
// added when there is none.
func setTensor(ts []wire.Tensor, t wire.Tensor) []wire.Tensor {
	for i := range ts {
		if ts[i].Name == t.Name {
			ts[i] = t
			return ts
		}
	}
	return append(ts, t)
}

// setScalars returns an edit that sets the scalars of vs by name.
func setScalars(vs map[string]float64) func([]wire.Tensor) []wire.Tensor {
	return func(ts []wire.Tensor) []wire.Tensor {
		for name, v := range vs {
			ts = setTensor(ts, wire.Scalar(name, v))
		}
		return ts
	}
}

// script builds envelopes, failing the test on the first error.
func script(t testing.TB, build ...func() (*wire.Envelope, error)) []*wire.Envelope {
	t.Helper()
	var out []*wire.Envelope
	for _, b := range build {
		e, err := b()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// runScripted runs site cfg on the script of envelopes and returns what
// it sent and its error. The site must end before ctx does.
func runScripted(ctx context.Context, t *testing.T, cfg SiteConfig, es []*wire.Envelope) ([]*wire.Envelope, error) {
	t.Helper()
	conn, err := newScriptConn(es)
	if err != nil {
		t.Fatal(err)
	}
	_, err = RunSite(ctx, cfg, conn)
	if ctx.Err() != nil {
		t.Fatalf("site still running when the test's time ran out: %v", err)
	}
	return conn.envelopes(), err
}

// TestSiteRefusesCountsBeyondItsLimits: a count in a coordinator's
// envelope that sizes what a site allocates is checked against the site's
// Limits (or its rows) before the site allocates. A hello with a site
// count of 2^40 made the site allocate 2^40 peer names and crash; now it
// refuses the run, naming the count and the limit, and tells the
// coordinator why (refusalLimit).
func TestSiteRefusesCountsBeyondItsLimits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := testConfig()
	d := makeData(40, 0)
	sel := Selection{Share: 0.3, Kernel: "gaussian"}
	mock, err := newMockCoordinator(ctx, cfg, []string{"site1", "site2"}, d, sel, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := mock.features()
	hello := func(edit func([]wire.Tensor) []wire.Tensor) func() (*wire.Envelope, error) {
		return func() (*wire.Envelope, error) {
			e, err := mock.hello(1)
			if err != nil || edit == nil {
				return e, err
			}
			return edited(e, edit)
		}
	}
	verdict := func() (*wire.Envelope, error) { return mock.verdict(2, nil) }
	for _, tc := range []struct {
		name   string
		limits Limits
		ids    bool // the site has identity hashes
		script func() []*wire.Envelope
		want   error
		msg    string
	}{
		{"a site count of 2^40", Limits{}, false, func() []*wire.Envelope {
			return script(t, hello(setScalars(map[string]float64{tSiteCount: 1 << 40})))
		}, ErrLimit, "site count 1099511627776 > 1000 (limits.sites)"},
		{"a site count of 2^52", Limits{}, false, func() []*wire.Envelope {
			return script(t, hello(setScalars(map[string]float64{tSiteCount: 1 << 52})))
		}, ErrLimit, "site count 4503599627370496 > 1000 (limits.sites)"},
		{"limits.sites", Limits{Sites: 1}, false, func() []*wire.Envelope {
			return script(t, hello(nil))
		}, ErrLimit, "site count 2 > 1 (limits.sites)"},
		{"limits.kernels", Limits{Kernels: 2}, false, func() []*wire.Envelope {
			return script(t, hello(func(ts []wire.Tensor) []wire.Tensor {
				return append(ts, kernelTensors("", []string{"k1", "k2"})...)
			}))
		}, ErrLimit, "kernel count 3 > 2 (limits.kernels)"},
		{"limits.candidates", Limits{Candidates: 4}, false, func() []*wire.Envelope {
			st := mockSelection([]string{"gaussian"}, []float64{1, 10}, p, nil, 0)
			return script(t, hello(nil), verdict, func() (*wire.Envelope, error) { return mock.losses(3, st) })
		}, ErrLimit, "candidate count 6 > 4 (limits.candidates)"},
		{"more rows left out than the site has", Limits{}, true, func() []*wire.Envelope {
			return script(t, hello(nil), func() (*wire.Envelope, error) {
				return mock.verdict(2, slices.Repeat([]int{0}, 41))
			})
		}, ErrProtocol, "leaves out 41 rows of site site1, which has 40"},
		{"an ensemble of more members than candidates", Limits{}, false, func() []*wire.Envelope {
			st := mockSelection([]string{"gaussian"}, nil, p, []int{0, 1}, 0)
			return script(t, hello(nil), verdict, func() (*wire.Envelope, error) {
				e, err := mock.final(3, st)
				if err != nil {
					return nil, err
				}
				return edited(e, func(ts []wire.Tensor) []wire.Tensor {
					return setTensor(ts, wire.Vector(tSelectMember, []float64{0, 1, 0}))
				})
			})
		}, ErrProtocol, "an ensemble of 3 members among 3 candidates"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := SiteConfig{Name: "site1", Coordinator: "coord", Data: d, Schema: testSchema, Columns: testColumns,
				Spectral: estimator.GaussianSpectral{}, KernelName: "gaussian", Limits: tc.limits}
			if tc.ids {
				for i := range d.Rows() {
					sc.Identities = append(sc.Identities, IdentityHMAC([]byte("s"), []string{fmt.Sprint(i)}))
				}
			}
			sent, err := runScripted(ctx, t, sc, tc.script())
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("site: %v, want %v saying %q", err, tc.want, tc.msg)
			}
			if tc.want == ErrLimit {
				if len(sent) == 0 {
					t.Fatal("the site sent no refusal")
				}
				checkRefusal(t, sent[len(sent)-1], refusalLimit)
			}
		})
	}
}

// TestCoordinatorRefusesSitesBeyondTheProtocol: a count in a site's answer
// that sizes what the coordinator allocates, or how long it trains, is
// checked before the coordinator uses it, and the run stops naming the
// site, the count and its bound (a SitesError, so that a coordinator with
// coordinator.min_sites goes on without the site). A gradient claiming
// 2^52 rows would have made a model with mini-batches train for 2^30
// rounds.
func TestCoordinatorRefusesSitesBeyondTheProtocol(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name   string
		sel    Selection
		kind   wire.Kind
		edit   func([]wire.Tensor) []wire.Tensor
		digest func([]wire.DigestList) []wire.DigestList
		msg    string
	}{
		{"covariates", Selection{}, wire.KindHello, func(ts []wire.Tensor) []wire.Tensor {
			ts = setTensor(ts, wire.Vector(tSchemaBinary, make([]float64, MaxCovariates+1)))
			ts = setTensor(ts, wire.Vector(tMomentsSum, make([]float64, MaxCovariates+2)))
			return setTensor(ts, wire.Vector(tMomentsSumSq, make([]float64, MaxCovariates+2)))
		}, func(ls []wire.DigestList) []wire.DigestList {
			for i := range ls {
				if ls[i].Name == dSchemaColumns {
					ls[i].Digests = make([]wire.Digest, MaxCovariates+1)
				}
			}
			return ls
		}, "hello of 4097 covariates, more than the protocol's 4096"},
		{"positive outcomes", Selection{}, wire.KindHello, func(ts []wire.Tensor) []wire.Tensor {
			return setTensor(ts, wire.Vector(tMomentsLog, []float64{1e6, 0, 0}))
		}, nil, "hello counts 1e+06 positive outcomes of 40 rows"},
		{"gradient rows", Selection{}, wire.KindGradient, setScalars(map[string]float64{tRows: 1 << 52}),
			nil, "gradient over 4503599627370496 rows, more than the site's 40"},
		{"statistics' features", Selection{Share: 0.3, Kernel: "gaussian"}, wire.KindStats, func(ts []wire.Tensor) []wire.Tensor {
			for _, arm := range statsNames {
				p := pStats + arm + "."
				ts = setTensor(ts, wire.Vector(p+"featsum", make([]float64, 3)))
				ts = setTensor(ts, wire.Vector(p+"moment", make([]float64, 3)))
				ts = setTensor(ts, wire.Tensor{Name: p + "gram", Shape: []int{3, 3}, Values: make([]float64, 9)})
			}
			return ts
		}, nil, "arm0 statistics of 3 features, the model has"},
		{"held-out rows", Selection{Share: 0.3, Kernel: "gaussian"}, wire.KindLosses, setScalars(map[string]float64{tLossN: 1e6}),
			nil, "losses.n 1e+06 is more than the site's 40 rows"},
		{"local ATE rows", Selection{}, wire.KindATE, setScalars(map[string]float64{tN: 1e6, tAIPWSumSq: 1e9}),
			nil, "local ATE over 1000000 rows, more than the site's 40"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFed(40, 40)
			f.net.Intercept = func(b []byte) [][]byte {
				e, err := wire.Unmarshal(b)
				if err != nil || e.Sender != "site1" || e.Kind != tc.kind {
					return [][]byte{b}
				}
				lists := e.DigestLists()
				if tc.digest != nil {
					lists = tc.digest(slices.Clone(lists))
				}
				if e, err = wire.New(e.Header, tc.edit(slices.Clone(e.Tensors())), lists...); err == nil {
					b, err = e.Marshal()
				}
				if err != nil {
					t.Errorf("edit the %s: %v", tc.kind, err)
				}
				return [][]byte{b}
			}
			sites := f.start(ctx)
			cc := f.coordinator(testConfig())
			cc.Selection = tc.sel
			_, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
			if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tc.msg) || !slices.Equal(FaultySites(err), []string{"site1"}) {
				t.Errorf("coordinator: %v (sites at fault %v), want ErrProtocol saying %q blaming site1", err, FaultySites(err), tc.msg)
			}
			for _, s := range sites {
				<-s
			}
		})
	}
}

// TestResumeChecksTheCheckpoint: the counts of a checkpoint that size
// what a resumed coordinator allocates or indexes are checked first. A
// model in training of 2^40 sites made the estimator's coordinator
// allocate for 2^40 sites and crash.
func TestResumeChecksTheCheckpoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := testConfig()
	mock, err := newMockCoordinator(ctx, cfg, []string{"site1", "site2"}, makeData(40, 0), Selection{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	valid := func() *State {
		st := *mock.c.st
		st.Trained, st.Kind = slices.Clone(st.Trained[:1]), 1
		st.Rows, st.Dropped, st.Step = []int{40, 40}, []int{0, 0}, 9
		co, err := estimator.NewCoordinator(estimator.Kinds[1], 2, mock.c.setups[0])
		if err != nil {
			t.Fatal(err)
		}
		st.Checkpoint = co.Checkpoint()
		return &st
	}
	if err := valid().checkResumable(2, cfg); err != nil {
		t.Fatalf("a valid state: %v", err)
	}
	for _, tc := range []struct {
		name  string
		spoil func(st *State)
		msg   string
	}{
		{"covariates", func(st *State) { st.Schema.Binary = make([]bool, MaxCovariates+1) }, "covariates 4097 > 4096"},
		{"features", func(st *State) { st.Config.Features = 1 << 40 }, "features 1099511627776 > 4096"},
		{"latent", func(st *State) { st.Config.Latent = 513 }, "latent 513 > 512"},
		{"L-BFGS memory", func(st *State) { st.Config.Store = 1 << 40 }, "store 1099511627776 > 10"},
		{"sites of the model in training", func(st *State) { st.Checkpoint.Sites = 1 << 40 }, "has 1099511627776 sites, want the outcome model of 2"},
		{"model in training", func(st *State) { st.Checkpoint.Model = estimator.Latent }, "the latent model in training has 2 sites, want the outcome model of 2"},
		{"weights of a trained model", func(st *State) { st.Trained[0].Weights = st.Trained[0].Weights[:1] }, "trained model 0 lacks the weights or transfer matrix of 2 sites"},
		{"transfer matrix", func(st *State) { st.Trained[0].Lambda = mat.NewSymDense(1, []float64{1}) }, "trained model 0 has a 1×1 transfer matrix, want 2×2"},
		{"candidates and estimators", func(st *State) { st.Selected = &SelectState{Candidates: make([]selection.Candidate, 2)} },
			"model selection of 2 candidates and 0 estimators"},
		{"chosen candidate", func(st *State) { st.Selected = mockSelection([]string{"g"}, nil, 1, nil, 2) }, "model selection chose candidate 2 of 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := valid()
			tr := *st.Trained[0]
			st.Trained[0] = &tr
			tc.spoil(st)
			err := st.checkResumable(2, cfg)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%v, want an error saying %q", err, tc.msg)
			}
		})
	}
	// Through RunCoordinator, which refuses the checkpoint rather than
	// crash, before it sends anything.
	st := valid()
	st.Checkpoint.Sites = 1 << 40
	cp := &memCheckpoints{}
	if err := cp.Save(ctx, st); err != nil {
		t.Fatal(err)
	}
	cc := newFed(40, 40).coordinator(cfg)
	cc.Checkpoints = cp
	if _, err := RunCoordinator(ctx, cc, NewMemNetwork().Endpoint("coord")); err == nil || !strings.Contains(err.Error(), "1099511627776 sites") {
		t.Errorf("resuming a model in training of 2^40 sites: %v, want an error naming the count", err)
	}
}

// TestDecodeCountsAreCapped: the decoders that read a count sizing an
// allocation refuse one beyond its bound, naming both.
func TestDecodeCountsAreCapped(t *testing.T) {
	env := func(kind wire.Kind, ts ...wire.Tensor) *wire.Envelope {
		e, err := wire.New(wire.Header{RunID: "r", Kind: kind, Sender: "coord", Recipient: "site1"}, ts)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	st := mockSelection([]string{"gaussian"}, []float64{1}, 2, nil, 0)
	for _, tc := range []struct {
		name string
		err  error
		want error
		msg  string
	}{
		{"candidates", func() error {
			_, err := decodeCandidates(env(wire.KindWeights, st.lossTensors()...), []string{"gaussian"}, 3)
			return err
		}(), ErrLimit, "candidate count 4 > 3 (limits.candidates)"},
		{"kernels", func() error {
			_, _, err := decodeKernels(env(wire.KindHello, kernelTensors("gaussian", []string{"a", "b", "c"})...), 3)
			return err
		}(), ErrLimit, "kernel count 4 > 3 (limits.kernels)"},
		{"kernels without the run's", func() error {
			_, _, err := decodeKernels(env(wire.KindHello, kernelTensors("", []string{"a", "b", "c"})...), 3)
			return err
		}(), ErrLimit, "kernel count 4 > 3 (limits.kernels)"},
		{"site sums' count", func() error {
			_, err := decodeSiteSums(env(wire.KindLosses, siteSumsTensors(selection.SiteSums{
				Pairs: selection.Pairs{C: 1, N: 41, Loss: []float64{1}, Res: []float64{1}}, Centre: selection.Centre{N: 40, CATE: []float64{0}}})...), 1, 40)
			return err
		}(), ErrProtocol, "losses.n 41 is more than the site's 40 rows"},
	} {
		if !errors.Is(tc.err, tc.want) || !strings.Contains(tc.err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, tc.err, tc.want, tc.msg)
		}
	}
	if _, _, err := decodeKernels(env(wire.KindHello, kernelTensors("gaussian", []string{"a", "b"})...), 3); err != nil {
		t.Errorf("three kernels of three: %v", err)
	}
}
