package federation

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/selection"
)

// The fuzz targets of this file drive the state machines, not only the
// decoders: FuzzSite runs a site (RunSite) on a sequence of well-formed
// but hostile envelopes from a coordinator, and FuzzCoordinator runs a
// coordinator (RunCoordinator) whose sites' answers are edited into
// hostile ones. The fuzzer's bytes choose the envelopes, their order and
// their values; every envelope is built with the package's own encoders
// and sealed by package wire, so that it passes the transport. The
// property: the role ends, with its result or an error, without a panic,
// within a time limit, and without allocating more than maxFuzzAlloc.
// Their seed corpora are in testdata/fuzz. Run with, e.g.:
//
//	go test ./federation -run '^$' -fuzz '^FuzzSite$' -fuzztime 60s

// maxFuzzAlloc bounds what one run of a fuzz target may allocate: its
// sites have 40 rows and tiny models, so that a run allocates a few MB.
const maxFuzzAlloc = 512 << 20

// fuzzTimeout bounds one run of a fuzz target; a run takes milliseconds.
const fuzzTimeout = 30 * time.Second

// fuzzBytes reads the fuzzer's choices from its input; past the end every
// choice is 0, the first option, which is the honest one.
type fuzzBytes struct {
	b []byte
	i int
}

func (r *fuzzBytes) next() byte {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

func (r *fuzzBytes) intn(n int) int { return int(r.next()) % n }

func (r *fuzzBytes) done() bool { return r.i >= len(r.b) }

func pick[T any](r *fuzzBytes, vs ...T) T { return vs[r.intn(len(vs))] }

// hostileValues are values a count or a setting may be sent as: at and
// around the fuzz limits, past every bound, not whole, negative.
var hostileValues = []float64{0, 1, 2, 3, 5, 8, 9, 12, 13, 16, 17, 21, 40, 41, 64, 1000, 1001, 1 << 31, 1<<32 - 1, 1 << 32,
	1 << 40, 1 << 52, 1<<52 + 1, 1 << 53, 1e300, -1, -1e300, 0.5, 2.5}

// hostileDims are the dimensions a reshaped tensor may take.
var hostileDims = []int{0, 1, 2, 3, 5, 8, 20, 21, 22, 40, 64}

// fuzzLimits are tight limits, so that what a site accepts is cheap.
var fuzzLimits = Limits{Features: 16, Latent: 4, Draws: 4, Samples: 20, MHSteps: 4, Folds: 5, Rounds: 50, MinBatch: 1, Kernels: 3,
	Sites: 8, Candidates: 16}

// fuzzConfig is the run's configuration in both targets: tiny models and
// few rounds.
func fuzzConfig() estimator.Config {
	c := testConfig()
	c.Features, c.Latent, c.Rounds, c.Samples, c.Draws = 8, 2, 2, 5, 2
	return c
}

// fuzzFixture holds what the targets' runs share: the sites' rows and the
// mock coordinators, which take a few milliseconds to set up.
var fuzzFixture = struct {
	sync.Mutex
	data  []*estimator.Data
	mocks map[int]*mockCoordinator
}{mocks: map[int]*mockCoordinator{}}

// fuzzData returns the rows of the fuzz targets' sites.
func fuzzData() []*estimator.Data {
	fuzzFixture.Lock()
	defer fuzzFixture.Unlock()
	if fuzzFixture.data == nil {
		fuzzFixture.data = []*estimator.Data{makeData(40, 0), makeData(40, 1)}
	}
	return fuzzFixture.data
}

// fuzzRuns are the kinds of run the targets fuzz: no model selection, a
// selection, and a selection among the further kernels of testKernels.
var fuzzRuns = []struct {
	sel   Selection
	extra func() []selection.Kernel
}{
	{Selection{}, func() []selection.Kernel { return nil }},
	{Selection{Share: 0.3, Kernel: "gaussian"}, func() []selection.Kernel { return nil }},
	{Selection{Share: 0.3, Kernel: "gaussian"}, testKernels},
}

// fuzzMock returns the mock coordinator of run kind k (fuzzRuns) to site1
// of site1 and site2.
func fuzzMock(t *testing.T, k int) *mockCoordinator {
	fuzzFixture.Lock()
	m := fuzzFixture.mocks[k]
	fuzzFixture.Unlock()
	if m != nil {
		return m
	}
	m, err := newMockCoordinator(context.Background(), fuzzConfig(), []string{"site1", "site2"}, fuzzData()[0], fuzzRuns[k].sel, fuzzRuns[k].extra())
	if err != nil {
		t.Fatal(err)
	}
	fuzzFixture.Lock()
	fuzzFixture.mocks[k] = m
	fuzzFixture.Unlock()
	return m
}

// checkEnded fails the test when a role's run did not end before ctx, or
// allocated more than maxFuzzAlloc since before.
func checkEnded(t *testing.T, ctx context.Context, err error, before *runtime.MemStats) {
	t.Helper()
	if ctx.Err() != nil {
		t.Fatalf("still running after %s (%v)", fuzzTimeout, err)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > maxFuzzAlloc {
		t.Fatalf("allocated %d MB", n>>20)
	}
}

// hostileTensors edits ts as r chooses: mostly not at all, otherwise one
// tensor removed, turned into a scalar of a hostile value, or reshaped.
func hostileTensors(r *fuzzBytes, ts []wire.Tensor) []wire.Tensor {
	op := r.intn(8)
	if op < 4 || len(ts) == 0 {
		return ts
	}
	i := r.intn(len(ts))
	switch op {
	case 4:
		return slices.Delete(ts, i, i+1)
	case 5:
		ts[i] = wire.Scalar(ts[i].Name, pick(r, hostileValues...))
	case 6:
		shape := make([]int, r.intn(3))
		n := 1
		for j := range shape {
			shape[j] = pick(r, hostileDims...)
			n *= shape[j]
		}
		ts[i] = wire.Tensor{Name: ts[i].Name, Shape: shape, Values: make([]float64, n)}
	case 7:
		if len(ts[i].Shape) == 2 {
			ts[i] = wire.Tensor{Name: ts[i].Name, Shape: []int{ts[i].Shape[1], ts[i].Shape[0]}, Values: ts[i].Values}
		} else if len(ts[i].Values) > 0 {
			v := slices.Clone(ts[i].Values)
			v[r.intn(len(v))] = pick(r, hostileValues...)
			ts[i] = wire.Tensor{Name: ts[i].Name, Shape: ts[i].Shape, Values: v}
		}
	}
	return ts
}

// hostileHeader edits h as r chooses: mostly not at all.
func hostileHeader(r *fuzzBytes, h wire.Header) wire.Header {
	switch r.intn(12) {
	case 8:
		h.RunID = "run-2"
	case 9:
		h.Sender = "intruder"
	case 10:
		h.Model = pick(r, "latent", "outcome.1", "propensity.2", "latent.9", "latent.01", "bogus", "")
	case 11:
		h.Kind = pick(r, wire.Kinds()...)
	}
	return h
}

// reseal returns e with header h, tensors ts and lists, or e itself when
// package wire refuses them (a NaN, a bad shape), as a transport would.
func reseal(e *wire.Envelope, h wire.Header, ts []wire.Tensor, lists []wire.DigestList) *wire.Envelope {
	if d, err := wire.New(h, ts, lists...); err == nil {
		return d
	}
	return e
}

// maxScript bounds the envelopes of one FuzzSite run.
const maxScript = 40

// siteScript builds the envelopes r chooses from mock, a hostile
// coordinator to site1, until r's input ends. Each envelope takes a byte
// for its step (0: the next), one for its kind and its own (0: honest),
// one for its header, one or more for its tensors and one for a
// duplicate.
//
// With sub, the final weights ask about fuzzSubgroups and the global ATE
// carries their global effects.
func siteScript(t *testing.T, r *fuzzBytes, mock *mockCoordinator, run int, sub bool) []*wire.Envelope {
	var asked, globals []wire.Tensor
	if sub {
		asked, globals = subgroupTensors(fuzzSubgroups), globalGateTensors(fuzzGlobalGATEs, -1)
	}
	var out []*wire.Envelope
	step := uint64(0)
	p := mock.features()
	kernels := append([]string{"gaussian"}, extraNames(fuzzRuns[run].extra())...)
	for len(out) < maxScript && (len(out) == 0 || !r.done()) {
		switch r.intn(6) {
		case 0, 1:
			step++
		case 2: // the same step again
		case 3:
			step = max(step, 1) - 1
		case 4:
			step += 1000
		case 5:
			step = math.MaxUint64 - uint64(r.intn(2))
		}
		var e *wire.Envelope
		var err error
		switch r.intn(10) {
		case 0:
			if e, err = mock.hello(step); err == nil {
				e = reseal(e, e.Header, hostileHello(r, slices.Clone(e.Tensors())), e.DigestLists())
			}
		case 1:
			e, err = mock.verdict(step, pick(r, []int(nil), []int{0}, []int{0, 0}, []int{39}, []int{40}, slices.Repeat([]int{1}, 41)))
		case 2:
			e, err = mock.weights(step, pick(r, estimator.Kinds...), r.intn(4))
		case 3:
			e, err = mock.stats(step)
		case 4:
			e, err = mock.losses(step, mockSelection(kernels[:1+r.intn(len(kernels))], pick(r, []float64{1}, nil, []float64{1, 10, 100, 1000}), pick(r, p, p+1, 0), nil, 0))
		case 5:
			members := pick(r, []int{0, 1}, nil, []int{0}, []int{1, 2, 3}, []int{0, 0}, []int{9})
			sel := mockSelection(kernels[:1+r.intn(len(kernels))], pick(r, []float64{1}, nil), pick(r, p, p-1), members, r.intn(4))
			sel.Chosen = min(sel.Chosen, len(sel.Candidates)-1) // the mock's encoder indexes it; the site sees others through hostileTensors
			e, err = mock.final(step, sel)
		case 6:
			e, err = mock.final(step, nil, asked...)
		case 7:
			e, err = mock.global(step, int(pick(r, hostileValues[:17]...)), globals...)
		case 8:
			if e, err = mock.done(step, pick(r, 1.0, -1, 0)); err == nil && r.intn(2) == 1 {
				e = reseal(e, e.Header, append(slices.Clone(e.Tensors()), wire.Scalar(pick(r, tRefusedColumn, tRefusedKernel), pick(r, hostileValues...))), nil)
			}
		case 9:
			e, err = wire.New(wire.Header{RunID: "run-1", Round: step, Kind: pick(r, wire.Kinds()...), Sender: "coord", Recipient: "site1"},
				[]wire.Tensor{wire.Scalar(pick(r, tRejoin, tStatus, tSiteRows, tSelectStage), pick(r, hostileValues...))})
		}
		if err != nil {
			t.Fatalf("build a coordinator's envelope: %v", err)
		}
		e = reseal(e, hostileHeader(r, e.Header), hostileTensors(r, slices.Clone(e.Tensors())), e.DigestLists())
		out = append(out, e)
		if r.intn(8) == 7 {
			out = append(out, e) // a duplicate
		}
	}
	return out
}

// hostileHello edits a hello's tensors as r chooses: the site count and
// index, a configuration setting, the held-out share, the kernels, the
// peers and the rejoin count.
func hostileHello(r *fuzzBytes, ts []wire.Tensor) []wire.Tensor {
	switch r.intn(10) {
	case 1:
		return setTensor(ts, wire.Scalar(tSiteCount, pick(r, hostileValues...)))
	case 2:
		return setTensor(ts, wire.Scalar(tSiteIndex, pick(r, hostileValues...)))
	case 3, 4:
		f := configFields[r.intn(len(configFields))]
		return setTensor(ts, wire.Scalar(f.name, pick(r, hostileValues...)))
	case 5:
		return setTensor(ts, wire.Scalar(tSelectShare, pick(r, 0, 0.3, 1, -0.5, 0.999999)))
	case 6:
		var names []string
		for j := range r.intn(6) {
			names = append(names, pick(r, "wide", "narrow", "unknown", fmt.Sprintf("k%d", j)))
		}
		return append(ts, kernelTensors(pick(r, "", "gaussian", "wide"), names)...)
	case 7:
		return setTensor(ts, wire.Scalar(tPeerPrefix+pick(r, "site1", "site3", "Bad Name"), pick(r, hostileValues...)))
	case 8:
		return setTensor(ts, wire.Scalar(tSiteRows, pick(r, hostileValues...)))
	case 9:
		return setTensor(ts, wire.Scalar(tRejoin, pick(r, hostileValues...)))
	}
	return ts
}

// FuzzSite runs a site on a sequence of envelopes from a hostile
// coordinator: hellos with odd counts and settings at and beyond the
// site's limits, verdicts, weights of the wrong shapes or models, rounds
// out of order, repeated and past steps, model selection's stages with
// candidates and ensembles of odd sizes, a global ATE or a done before
// anything. The site must end (the script ends with its inbox closed)
// without a panic, in time and within maxFuzzAlloc. Its seed corpus is
// testdata/fuzz/FuzzSite (fuzzSeeds).
func FuzzSite(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		ctx, cancel := context.WithTimeout(context.Background(), fuzzTimeout)
		defer cancel()
		res, err := fuzzSiteRun(ctx, t, b)
		checkEnded(t, ctx, err, &before)
		if err == nil && res == nil {
			t.Fatal("the site ended without a result or an error")
		}
	})
}

// fuzzSiteRun is one run of FuzzSite on the fuzzer's input b.
func fuzzSiteRun(ctx context.Context, t *testing.T, b []byte) (*SiteResult, error) {
	r := &fuzzBytes{b: b}
	run := r.intn(len(fuzzRuns))
	mock := fuzzMock(t, run)
	d := fuzzData()[0]
	cfg := SiteConfig{Name: "site1", Coordinator: "coord", Data: d, Schema: testSchema, Columns: testColumns,
		Spectral: estimator.GaussianSpectral{}, KernelName: "gaussian", Limits: fuzzLimits}
	opts := r.next()
	if opts&1 != 0 {
		cfg.Kernels = kernelsOf(testKernels())
	}
	if opts&2 != 0 {
		for i := range d.Rows() {
			cfg.Identities = append(cfg.Identities, IdentityHMAC([]byte("s"), []string{fmt.Sprint(i)}))
		}
	}
	if opts&4 != 0 {
		cfg.Privacy = &SitePrivacy{Epsilon: 8, Delta: 1e-5, Clip: 1}
	}
	if opts&8 != 0 {
		cfg.MinArmRows = -1
	}
	sub := opts&16 != 0
	if sub {
		cfg.Subgroups, cfg.SubgroupRows = SubgroupPolicy{Any: true}, fuzzSubgroupRows(d.Rows())
	}
	conn, err := newScriptConn(siteScript(t, r, mock, run, sub))
	if err != nil {
		t.Fatal(err)
	}
	return RunSite(ctx, cfg, conn)
}

// loopConn is the coordinator's Conn in FuzzCoordinator: every envelope it
// sends is handled at once, in the coordinator's goroutine, by the site
// it is addressed to, and each answer of the site is edited as the
// fuzzer chooses (hostileAnswer) before it reaches the coordinator's
// inbox. A run is thus one goroutine, and the fuzzer's input replays it.
type loopConn struct {
	r     *fuzzBytes
	inbox chan *wire.Envelope
	sites map[string]*site
	conns map[string]*scriptConn
}

func (c *loopConn) Send(ctx context.Context, e *wire.Envelope) error {
	d, err := transported(e)
	if err != nil {
		return err
	}
	s := c.sites[d.Recipient]
	if s == nil {
		return nil // a site that has stopped
	}
	conn := c.conns[d.Recipient]
	done, err := s.handle(ctx, d)
	conn.mu.Lock()
	answers := conn.sent
	conn.sent = nil
	conn.mu.Unlock()
	if err != nil || done {
		delete(c.sites, d.Recipient)
	}
	for _, a := range answers {
		for _, h := range hostileAnswer(c.r, a) {
			if h, err = transported(h); err != nil {
				return err
			}
			select {
			case c.inbox <- h:
			default: // a full inbox loses the envelope, as a network may
			}
		}
	}
	return nil
}

func (c *loopConn) Inbox() <-chan *wire.Envelope { return c.inbox }

// hostileAnswer returns what reaches the coordinator of a site's answer a,
// as r chooses: mostly a itself; otherwise nothing, two copies, a past or
// future step, another kind, edited tensors (counts, shapes, a missing
// tensor), hello's fingerprints and covariates, a refusal, a rejoin, a
// premature done, or a value that is not finite, which package wire
// refuses (and so a itself).
func hostileAnswer(r *fuzzBytes, a *wire.Envelope) []*wire.Envelope {
	h, ts, lists := a.Header, slices.Clone(a.Tensors()), slices.Clone(a.DigestLists())
	switch r.intn(16) {
	case 8:
		return nil
	case 9:
		return []*wire.Envelope{a, a}
	case 10:
		h.Round = pick(r, h.Round-1, h.Round+1, h.Round+1000, 0)
	case 11:
		h.Kind = pick(r, wire.Kinds()...)
	case 12, 13:
		ts = hostileTensors(r, ts)
		if len(ts) == len(a.Tensors()) && r.intn(2) == 1 && len(ts) > 0 {
			i := r.intn(len(ts))
			ts[i] = wire.Scalar(ts[i].Name, pick(r, hostileValues...))
		}
	case 14:
		switch r.intn(6) {
		case 0:
			h.Kind, ts, lists = wire.KindDone, []wire.Tensor{wire.Scalar(tStatus, -1), wire.Scalar(tRefusalReason, pick(r, hostileValues...))}, nil
		case 1:
			h.Kind, ts, lists = wire.KindHello, []wire.Tensor{wire.Scalar(tRejoin, pick(r, hostileValues...))}, nil
		case 2:
			h.Kind, ts, lists = wire.KindDone, []wire.Tensor{wire.Scalar(tStatus, 1)}, nil
		case 3:
			if len(ts) > 0 {
				v := slices.Clone(ts[0].Values)
				v[0] = pick(r, math.NaN(), math.Inf(1), math.Inf(-1))
				ts[0] = wire.Tensor{Name: ts[0].Name, Shape: ts[0].Shape, Values: v}
			}
		case 4: // the fingerprints of another kernel, or of none, or of more
			for i := range lists {
				if lists[i].Name == dOmega0 {
					lists[i].Digests = make([]wire.Digest, r.intn(4))
				}
			}
		case 5: // more covariates than the protocol allows, or none
			n := pick(r, MaxCovariates+1, 0, 1)
			ts = setTensor(ts, wire.Vector(tSchemaBinary, make([]float64, n)))
			ts = setTensor(ts, wire.Vector(tMomentsSum, make([]float64, n+1)))
			ts = setTensor(ts, wire.Vector(tMomentsSumSq, make([]float64, n+1)))
			for i := range lists {
				if lists[i].Name == dSchemaColumns {
					lists[i].Digests = make([]wire.Digest, n)
				}
			}
		}
	case 15:
		// The gradient of another model's shapes: the blocks of the
		// outcome model sent as the latent model's, and so on.
		if a.Kind == wire.KindGradient {
			for i := range ts {
				if len(ts[i].Shape) == 2 {
					ts[i] = wire.Tensor{Name: ts[i].Name, Shape: []int{ts[i].Shape[0] + 1, ts[i].Shape[1]},
						Values: make([]float64, (ts[i].Shape[0]+1)*ts[i].Shape[1])}
					break
				}
			}
		}
	default:
		return []*wire.Envelope{a}
	}
	return []*wire.Envelope{reseal(a, h, ts, lists)}
}

// FuzzCoordinator runs a coordinator of two sites whose answers are
// edited into hostile ones (hostileAnswer): hello fingerprints and
// covariates, gradients of the wrong shapes, counts beyond the site's
// rows, stats and losses of the wrong lengths, ATE sums, refusals and
// rejoins at any step, answers lost, repeated or out of order. The
// coordinator must end, with its result or an error, without a panic, in
// time and within maxFuzzAlloc. Its seed corpus is
// testdata/fuzz/FuzzCoordinator (fuzzSeeds).
func FuzzCoordinator(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		ctx, cancel := context.WithTimeout(context.Background(), fuzzTimeout)
		defer cancel()
		res, err := fuzzCoordinatorRun(ctx, t, b)
		checkEnded(t, ctx, err, &before)
		if err == nil && res == nil {
			t.Fatal("no result and no error")
		}
	})
}

// fuzzCoordinatorRun is one run of FuzzCoordinator on the fuzzer's input b.
func fuzzCoordinatorRun(ctx context.Context, t *testing.T, b []byte) (*Result, error) {
	r := &fuzzBytes{b: b}
	run := fuzzRuns[r.intn(len(fuzzRuns))]
	names := []string{"site1", "site2"}
	conn := &loopConn{r: r, inbox: make(chan *wire.Envelope, 4096), sites: map[string]*site{}, conns: map[string]*scriptConn{}}
	for i, name := range names {
		sc := SiteConfig{Name: name, Coordinator: "coord", Data: fuzzData()[i], Schema: testSchema, Columns: testColumns,
			Spectral: estimator.GaussianSpectral{}, KernelName: "gaussian", Limits: fuzzLimits, Kernels: kernelsOf(testKernels())}
		c, err := newScriptConn(nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := newSite(sc, c)
		if err != nil {
			t.Fatal(err)
		}
		conn.sites[name], conn.conns[name] = s, c
	}
	cc := CoordinatorConfig{Name: "coord", RunID: "run-1", Sites: names, Config: fuzzConfig(), Spectral: estimator.GaussianSpectral{},
		KernelName: "gaussian", Selection: run.sel, Extra: run.extra(), RoundTimeout: 5 * time.Millisecond, Retries: 1}
	// One byte: bit 0 checkpoints, bit 1 subgroups, which both sites
	// evaluate (one predicate is refused, one a site may find too small).
	opts := r.intn(4)
	if opts&1 != 0 {
		cc.Checkpoints, cc.CheckpointEvery = &memCheckpoints{}, 1
	}
	if opts&2 != 0 {
		cc.Subgroups = fuzzSubgroups
		for _, name := range names {
			conn.sites[name].cfg.Subgroups = SubgroupPolicy{Any: true}
			conn.sites[name].cfg.SubgroupRows = fuzzSubgroupRows(conn.sites[name].cfg.Data.Rows())
		}
	}
	return RunCoordinator(ctx, cc, conn)
}

// fuzzSubgroups are the federated subgroups of the fuzz targets'
// subgroup runs: one of every other row, one of a single row (a small
// cell) and one the sites refuse.
var fuzzSubgroups = []Subgroup{{Name: "even", Predicate: "id % 2 = 0"}, {Name: "one", Predicate: "id = 0"}, {Name: "refused", Predicate: "(SELECT 1)"}}

// fuzzGlobalGATEs are the global effects a hostile coordinator sends of
// fuzzSubgroups: that of the first, from both sites.
var fuzzGlobalGATEs = []*GlobalGATE{{N: 20, Treated: 10, Control: 10, Estimate: inference.Estimate{Estimate: 1, SE: 0.5, Lower: 0.02, Upper: 1.98, N: 20}, PlugIn: 1, Sites: []int{0, 1}}}

// fuzzSubgroupRows evaluates fuzzSubgroups' predicates on rows rows as a
// site's store would.
func fuzzSubgroupRows(rows int) func(context.Context, string) ([]bool, error) {
	return func(_ context.Context, pred string) ([]bool, error) {
		in := make([]bool, rows)
		switch pred {
		case fuzzSubgroups[0].Predicate:
			for i := range in {
				in[i] = i%2 == 0
			}
		case fuzzSubgroups[1].Predicate:
			in[0] = true
		default:
			return nil, errors.New("refused: a subquery")
		}
		return in, nil
	}
}

var updateFuzzSeeds = flag.Bool("update-fuzz-seeds", false, "rewrite the seed corpora of FuzzSite and FuzzCoordinator in testdata/fuzz")

// fuzzSeeds are the seed corpora of the fuzz targets, by target and file
// name, as testdata/fuzz holds them (TestFuzzSeeds).
func fuzzSeeds() map[string]map[string][]byte {
	// FuzzSite: a byte for the kind of run (fuzzRuns), one for the site's
	// options, then the envelopes (siteScript), 0 being honest throughout.
	hello, verdict := []byte{0, 0, 0, 0, 0, 0}, []byte{0, 1, 0, 0, 0, 0}
	weights := func(kind byte) []byte { return []byte{0, 2, kind, 0, 0, 0, 0} }
	final, global := []byte{0, 6, 0, 0, 0}, []byte{0, 7, 15, 0, 0, 0}
	stats, losses, choice := []byte{0, 3, 0, 0, 0}, []byte{0, 4, 0, 0, 0, 0, 0, 0}, []byte{0, 5, 0, 0, 0, 0, 0, 0, 0, 0}
	site := map[string][]byte{
		"run":                  slices.Concat([]byte{0, 0}, hello, verdict, weights(0), weights(1), weights(2), final, global),
		"selection-run":        slices.Concat([]byte{1, 0}, hello, verdict, weights(0), stats, losses, choice, global),
		"kernels-run":          slices.Concat([]byte{2, 1}, hello, verdict, weights(2), []byte{0, 2, 2, 1, 0, 0, 0}, stats, losses, choice, global),
		"site-count-2e40":      {0, 0, 0, 0, 1, 20, 0, 0, 0},
		"verdict-of-41-rows":   slices.Concat([]byte{0, 2}, hello, []byte{0, 1, 5, 0, 0, 0}),
		"weights-wrong-shape":  slices.Concat([]byte{0, 0}, hello, verdict, []byte{0, 2, 1, 0, 0, 6, 2, 3, 3, 0}),
		"done-before-anything": slices.Concat([]byte{0, 0}, []byte{0, 8, 0, 0, 0, 0, 0}, global),
		"steps-out-of-order":   slices.Concat([]byte{0, 0}, hello, hello, []byte{3, 1, 0, 0, 0, 7}, weights(0), []byte{4, 2, 0, 0, 0, 0, 0}),
		"subgroups-run":        slices.Concat([]byte{0, 16}, hello, verdict, weights(0), weights(1), weights(2), final, global),
	}
	// FuzzCoordinator: a byte for the kind of run, one for checkpoints,
	// then per answer of a site, in the order the sites send them, what
	// becomes of it (hostileAnswer), 0 being honest throughout.
	coord := map[string][]byte{
		"run":                   {0},
		"selection-run":         {1, 1},
		"kernels-run":           {2},
		"moments-n-2e40":        {0, 0, 12, 5, 3, 20, 0},
		"hello-rows-2e40":       {0, 0, 12, 5, 2, 20, 0},
		"refusal-at-hello":      {0, 1, 14, 0, 21},
		"covariates-4097":       {0, 0, 14, 5, 0},
		"fingerprints-of-three": {2, 0, 14, 4, 3},
		"rejoin-in-training":    {0, 0, 0, 0, 0, 0, 14, 1, 5},
		"lost-and-repeated":     {0, 0, 8, 9, 10, 1, 11, 3},
		"gradient-wrong-shape":  {0, 0, 0, 0, 0, 0, 15},
		"gradient-nan":          {0, 0, 0, 0, 0, 0, 14, 3, 0},
		"subgroups-run":         {0, 2},
		"subgroups-selection":   {1, 2},
	}
	return map[string]map[string][]byte{"FuzzSite": site, "FuzzCoordinator": coord}
}

// TestFuzzSeeds fails unless testdata/fuzz holds the seed corpora of
// fuzzSeeds; go test -run TestFuzzSeeds -update-fuzz-seeds writes them.
func TestFuzzSeeds(t *testing.T) {
	for target, seeds := range fuzzSeeds() {
		dir := filepath.Join("testdata", "fuzz", target)
		if *updateFuzzSeeds {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for name, b := range seeds {
			want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
			path := filepath.Join(dir, name)
			if *updateFuzzSeeds {
				if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if got, err := os.ReadFile(path); err != nil || string(got) != want {
				t.Errorf("%s is not the seed of fuzzSeeds (%v); run go test ./federation -run TestFuzzSeeds -update-fuzz-seeds", path, err)
			}
		}
	}
}

// TestFuzzSeedsReachTheirStates runs every seed of the fuzz targets once
// and checks that it ends as its name says: a complete run, or the error
// of the hostile envelope it sends, so that the seeds keep starting the
// fuzzer where they were meant to as the protocol changes.
func TestFuzzSeedsReachTheirStates(t *testing.T) {
	want := map[string]map[string]string{
		"FuzzSite": {
			"run": "", "selection-run": "", "kernels-run": "",
			"site-count-2e40":      "site count 1099511627776 > 8 (limits.sites)",
			"verdict-of-41-rows":   "leaves out 41 rows of site site1, which has 40",
			"weights-wrong-shape":  "outcome: 1 shared parameters, want 2",
			"done-before-anything": ErrTransportClosed.Error(),
			"steps-out-of-order":   "weights before the dedup-verdict",
			"subgroups-run":        "",
		},
		"FuzzCoordinator": {
			"run": "", "selection-run": "", "kernels-run": "", "lost-and-repeated": "",
			"gradient-nan":          "", // package wire refuses the NaN: the gradient arrives as it was
			"hello-rows-2e40":       "", // a site may claim any row count (see TestCoordinatorRefusesSitesBeyondTheProtocol)
			"moments-n-2e40":        "hello has the moments of 1099511627776 rows of 40",
			"covariates-4097":       "hello of 4097 covariates, more than the protocol's 4096",
			"fingerprints-of-three": "kernel frequencies differ",
			"gradient-wrong-shape":  "block \"psi\" is 21×1, want 20×1",
			"refusal-at-hello":      "site1 refused the run: for a reason this coordinator does not know (code 4503599627370496)",
			"rejoin-in-training":    "site silent",
			"subgroups-run":         "", "subgroups-selection": "",
		},
	}
	for target, seeds := range fuzzSeeds() {
		for name, b := range seeds {
			t.Run(target+"/"+name, func(t *testing.T) {
				msg, ok := want[target][name]
				if !ok {
					t.Fatal("no expected outcome")
				}
				ctx, cancel := context.WithTimeout(context.Background(), fuzzTimeout)
				defer cancel()
				var err error
				var done bool
				if target == "FuzzSite" {
					var res *SiteResult
					res, err = fuzzSiteRun(ctx, t, b)
					done = res != nil && res.Global.PlugIn.N > 0
					if done && strings.HasPrefix(name, "subgroups") && (len(res.Subgroups) != len(fuzzSubgroups) || res.GlobalGATE[0] == nil) {
						t.Errorf("asked %d subgroups, global effects %v: want %d and the first's", len(res.Subgroups), res.GlobalGATE, len(fuzzSubgroups))
					}
				} else {
					var res *Result
					res, err = fuzzCoordinatorRun(ctx, t, b)
					done = res != nil
					if done && strings.HasPrefix(name, "subgroups") && (len(res.GATE) != len(fuzzSubgroups) || res.GATE[0] == nil) {
						t.Errorf("global effects %v: want %d, the first pooled", res.GATE, len(fuzzSubgroups))
					}
				}
				switch {
				case msg == "" && (err != nil || !done):
					t.Errorf("%v, want a complete run", err)
				case msg != "" && (err == nil || !strings.Contains(err.Error(), msg)):
					t.Errorf("%v, want an error saying %q", err, msg)
				}
			})
		}
	}
}
