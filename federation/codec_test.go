package federation

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/heterogeneity"
	"github.com/crffd/crffd/inference"
)

// TestConfigFieldsCoverConfig fails when estimator.Config gains a field
// that hello does not carry: sites would silently train with its default
// while the coordinator used another value.
func TestConfigFieldsCoverConfig(t *testing.T) {
	local := map[string]bool{"Workers": true} // how a process runs, not what it computes
	want := 0
	ct := reflect.TypeOf(estimator.Config{})
	for i := range ct.NumField() {
		switch name := ct.Field(i).Name; {
		case local[name]:
		case name == "Seed":
			want += 2 // sent as two 32-bit halves
		default:
			want++
		}
	}
	if len(configFields) != want {
		t.Errorf("hello carries %d config fields, estimator.Config needs %d: add the new field to configFields", len(configFields), want)
	}
	// Every field survives the trip.
	c := estimator.DefaultConfig()
	c.Linear, c.LogOutcome, c.Seed, c.Features = 1.5, estimator.LogAlways, 1<<40+3, 17
	var got estimator.Config
	for _, f := range configFields {
		f.set(&got, f.get(&c))
	}
	c.Workers = 0
	if !reflect.DeepEqual(got, c) {
		t.Errorf("config after hello:\n%+v\nwant\n%+v", got, c)
	}
}

// TestEquivalenceWithLogOutcome repeats the equivalence check with the log
// outcome transform on, which depends on the log moments sent in hello.
func TestEquivalenceWithLogOutcome(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newFed(40, 50)
	for _, d := range f.data {
		for i := range d.Y {
			d.Y[i] += 20 // all positive
		}
	}
	cfg := testConfig()
	cfg.LogOutcome = estimator.LogAlways
	want, _, sites := runEquivalent(ctx, t, f, cfg)
	if !want.Setup.LogY() || !want.Setup.Scaler.LogYValid {
		t.Fatal("the log transform is not on: the test would not exercise the log moments")
	}
	for s, ch := range sites {
		if r := <-ch; r.err != nil {
			t.Fatalf("site %d: %v", s, r.err)
		}
	}
}

// TestScalerFieldsCovered fails when estimator.Scaler gains a field that
// the verdict does not carry to the sites.
func TestScalerFieldsCovered(t *testing.T) {
	s := estimator.Scaler{Mean: []float64{1, 2}, Scale: []float64{3, 4}, YMean: 5, YSD: 6, LogYMean: 7, LogYSD: 8, LogYValid: true, LogYPreferred: true}
	v := reflect.ValueOf(s)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("the test's Scaler leaves %s zero: set every field", v.Type().Field(i).Name)
		}
	}
	e, err := wire.New(wire.Header{RunID: "r", Model: "m", Kind: wire.KindDedupVerdict, Sender: "coord", Recipient: "site1"}, scalerTensors(s))
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeScaler(e, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Errorf("scaler after the verdict:\n%+v\nwant\n%+v", got, s)
	}
}

// TestDecodeATEs reads a site's ate envelope and the coordinator's
// global-ate envelope, and refuses ones that lack a tensor or carry an
// impossible count.
func TestDecodeATEs(t *testing.T) {
	envelope := func(kind wire.Kind, ts ...wire.Tensor) *wire.Envelope {
		e, err := wire.New(wire.Header{RunID: "r", Round: 3, Kind: kind, Sender: "a", Recipient: "b"}, ts)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	local := []wire.Tensor{wire.Scalar(tATE, 1.5), wire.Scalar(tN, 40), wire.Scalar(tAIPWSum, 60), wire.Scalar(tAIPWSumSq, 100), wire.Scalar(tClipped, 2)}
	ate, sums, clipped, err := decodeLocal(envelope(wire.KindATE, local...))
	if err != nil || ate != 1.5 || sums != (inference.Sums{N: 40, Sum: 60, SumSq: 100}) || clipped != 2 {
		t.Errorf("decodeLocal: %v %+v %d %v", ate, sums, clipped, err)
	}
	for _, bad := range [][]wire.Tensor{
		local[:4], // no clipped count
		{local[0], local[1], local[2], local[3], wire.Scalar(tClipped, 41)},                      // more clipped than rows
		{local[0], wire.Scalar(tN, 40.5), local[2], local[3], local[4]},                          // not a count
		{local[0], local[1], wire.Scalar(tAIPWSum, 400), wire.Scalar(tAIPWSumSq, 100), local[4]}, // Σψ² < (Σψ)²/n
	} {
		if _, _, _, err := decodeLocal(envelope(wire.KindATE, bad...)); !errors.Is(err, ErrProtocol) {
			t.Errorf("decodeLocal of %d tensors: error %v, want ErrProtocol", len(bad), err)
		}
	}
	nan := math.NaN()
	g := inference.ATEs{AIPW: inference.Estimate{Estimate: 2, SE: 0.1, Lower: 1.8, Upper: 2.2, N: 90}, Clipped: 3,
		PlugIn: inference.Estimate{Estimate: 1.7, SE: nan, Lower: nan, Upper: nan, N: 90}}
	got, err := decodeGlobal(envelope(wire.KindGlobalATE, globalTensors(g)...))
	if err != nil || fmt.Sprint(got) != fmt.Sprint(g) {
		t.Errorf("decodeGlobal: %+v, %v; want %+v", got, err, g)
	}
	if _, err := decodeGlobal(envelope(wire.KindGlobalATE, globalTensors(g)[:5]...)); !errors.Is(err, ErrProtocol) {
		t.Errorf("decodeGlobal without the clipped count: error %v, want ErrProtocol", err)
	}
}

// TestDecodeHeterogeneity: a site's sums of heterogeneity and the global
// tests come back as sent, and sums no rows could have given, or counts
// beyond the site's rows, are refused.
func TestDecodeHeterogeneity(t *testing.T) {
	envelope := func(kind wire.Kind, ts ...wire.Tensor) *wire.Envelope {
		e, err := wire.New(wire.Header{RunID: "r", Round: 3, Kind: kind, Sender: "a", Recipient: "b"}, ts)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	psi, cate := []float64{1, 3, 2, 5, 0, 4}, []float64{1, 2, 1.5, 3, 0.5, 2}
	blp, _ := heterogeneity.NewBLPSums(psi, cate, 1.5)
	pol, _ := heterogeneity.NewPolicySums([]float64{0, 1, 0, 2, 1, 1}, psi, []bool{false, true, false, true, false, true})
	bs, _ := heterogeneity.NewBuckets(psi, cate, nil, 0.5, 3)
	good := []wire.Tensor{wire.Vector(tHetBLP, blpVector(blp)), wire.Vector(tHetPolicy, policyVector(pol)), wire.Vector(tHetBuckets, bucketVector(bs))}
	got, err := decodeHetSums(envelope(wire.KindATE, good...), 6)
	if err != nil || got == nil || *got.BLP != blp || *got.Policy != pol || fmt.Sprint(got.Buckets) != fmt.Sprint(bs) {
		t.Errorf("decodeHetSums: %+v, %v; want %+v, %+v and %+v", got, err, blp, pol, bs)
	}
	if got, err := decodeHetSums(envelope(wire.KindATE), 6); got != nil || err != nil {
		t.Errorf("decodeHetSums of none: %+v, %v", got, err)
	}
	edit := func(name string, v []float64, i int, x float64) wire.Tensor {
		v = slices.Clone(v)
		v[i] = x
		return wire.Vector(name, v)
	}
	for _, tc := range []struct {
		why string
		t   wire.Tensor
	}{
		{"rows beyond the site's", edit(tHetBLP, blpVector(blp), 0, 7)},
		{"a count that is not one", edit(tHetBLP, blpVector(blp), 0, 5.5)},
		{"Σd⁰ other than N", edit(tHetBLP, blpVector(blp), 2, 5)},
		{"a negative Σd²", edit(tHetBLP, blpVector(blp), 4, -1)},
		{"a negative Σψ²", edit(tHetBLP, blpVector(blp), 11, -1)},
		{"short", wire.Vector(tHetBLP, blpVector(blp)[:13])},
		{"more treated than rows", edit(tHetPolicy, policyVector(pol), 0, 7)},
		{"parts of other counts", edit(tHetPolicy, policyVector(pol), 4, 5)},
		{"a negative sum of squares", edit(tHetPolicy, policyVector(pol), 6, -2)},
		{"a bucket's values not four", wire.Vector(tHetBuckets, bucketVector(bs)[:7])},
		{"an empty bucket", edit(tHetBuckets, bucketVector(bs), 1, 0)},
		{"buckets of more rows than the site's", edit(tHetBuckets, bucketVector(bs), 1, 6)},
		{"a bucket's negative Σψ²", edit(tHetBuckets, bucketVector(bs), 3, -1)},
	} {
		if _, err := decodeHetSums(envelope(wire.KindATE, tc.t), 6); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v, want ErrProtocol", tc.why, err)
		}
	}
	b, _ := blp.BLP()
	p, _ := pol.Policy()
	more, _ := heterogeneity.NewBuckets(psi, cate, nil, 0.5, 2)
	r, err := heterogeneity.NewRanked(append(bs, append(more, more...)...))
	if err != nil {
		t.Fatal(err)
	}
	g := GlobalHeterogeneity{BLP: &b, Policy: p, Ranked: r}
	back, err := decodeGlobalHet(envelope(wire.KindGlobalATE, globalHetTensors(g)...), 18)
	if err != nil || fmt.Sprint(*back.BLP, *back.Policy, *back.Ranked) != fmt.Sprint(b, *p, *r) {
		t.Errorf("decodeGlobalHet: %+v, %v; want %+v", back, err, g)
	}
	ts := globalHetTensors(g)
	for _, bad := range []wire.Tensor{edit(tHetGlobalBLP, ts[0].Values, 5, 1.5), edit(tHetGlobalBLP, ts[0].Values, 2, -1),
		edit(tHetGlobalBLP, ts[0].Values, 0, 19), edit(tHetGlobalPolicy, ts[1].Values, 1, 2), edit(tHetGlobalPolicy, ts[1].Values, 3, -0.5),
		edit(tHetGlobalRanked, ts[2].Values, 0, 19), edit(tHetGlobalRanked, ts[2].Values, 5, -1), wire.Vector(tHetGlobalRanked, ts[2].Values[:50])} {
		if _, err := decodeGlobalHet(envelope(wire.KindGlobalATE, bad), 18); !errors.Is(err, ErrProtocol) {
			t.Errorf("decodeGlobalHet of %s %v: %v, want ErrProtocol", bad.Name, bad.Values, err)
		}
	}
}

// FuzzDecodeATEs feeds arbitrary bytes, as a site or a coordinator could
// send them, to the decoders of the ate and global-ate envelopes. They must
// never panic, and sums they accept must be possible sums of scores.
// Run with: go test -fuzz FuzzDecodeATEs ./federation
func FuzzDecodeATEs(f *testing.F) {
	seed := func(kind wire.Kind, ts []wire.Tensor) { addEnvelope(f, kind, ts) }
	seed(wire.KindATE, []wire.Tensor{wire.Scalar(tATE, 1.5), wire.Scalar(tN, 40), wire.Scalar(tAIPWSum, 60), wire.Scalar(tAIPWSumSq, 100), wire.Scalar(tClipped, 2)})
	seed(wire.KindGlobalATE, globalTensors(inference.ATEs{AIPW: inference.Estimate{Estimate: 2, SE: 0.1, Lower: 1.8, Upper: 2.2, N: 90}, Clipped: 3,
		PlugIn: inference.Estimate{Estimate: 1.7, N: 90}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := wire.Unmarshal(b)
		if err != nil {
			return
		}
		if _, sums, clipped, err := decodeLocal(e); err == nil {
			if sums.N < 0 || clipped < 0 || clipped > sums.N || (sums.N > 0 && sums.SumSq < sums.Sum*sums.Sum/float64(sums.N)*(1-1e-9)) {
				t.Fatalf("accepted impossible sums %+v with %d clipped", sums, clipped)
			}
		}
		if g, err := decodeGlobal(e); err == nil && (g.Clipped < 0 || g.PlugIn.N < 0) {
			t.Fatalf("accepted an impossible global ATE %+v", g)
		}
		if h, err := decodeHetSums(e, 100); err == nil && h != nil && (h.BLP != nil && (h.BLP.N < 0 || h.BLP.N > 100) || h.Policy != nil && h.Policy.Treated > h.Policy.GainNone.N) {
			t.Fatalf("accepted impossible sums of heterogeneity %+v", h)
		}
		if _, err := decodeGlobalHet(e, 100); err != nil && !errors.Is(err, ErrProtocol) {
			t.Fatalf("global heterogeneity refused without ErrProtocol: %v", err)
		}
	})
}

// TestEquivalenceWithMiniBatches repeats the equivalence check with
// mini-batches smaller than every site (estimator.Config.BatchSize): each
// site draws its batches from the seed, its index, the model and the
// round, so daemons train on the rows the simulated federation does.
func TestEquivalenceWithMiniBatches(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newFed(40, 50)
	f.smallBatches()
	cfg := testConfig()
	cfg.BatchSize = 16
	_, _, sites := runEquivalent(ctx, t, f, cfg)
	for s, ch := range sites {
		if r := <-ch; r.err != nil {
			t.Fatalf("site %d: %v", s, r.err)
		}
	}
}

// TestTrainingWireIgnoresRowCount checks that, with mini-batches, what
// crosses the wire in training does not grow with the sites' rows: sites
// of 40 and 50 rows and sites ten times larger exchange as many weight and
// gradient envelopes, of the same encoded sizes, per round. (One epoch
// of 500 rows in batches of 16 takes 32 rounds, so both runs are given 40
// rounds: more rows may mean more rounds, never more per round.)
func TestTrainingWireIgnoresRowCount(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := testConfig()
	cfg.BatchSize, cfg.Rounds = 16, 40
	traffic := func(sizes ...int) map[wire.Kind][]int {
		f := newFed(sizes...)
		f.smallBatches()
		var mu sync.Mutex
		got := map[wire.Kind][]int{}
		f.net.Intercept = func(b []byte) [][]byte {
			if e, err := wire.Unmarshal(b); err == nil && (e.Kind == wire.KindWeights || e.Kind == wire.KindGradient) {
				mu.Lock()
				got[e.Kind] = append(got[e.Kind], len(b))
				mu.Unlock()
			}
			return [][]byte{b}
		}
		sites := f.start(ctx)
		if _, err := RunCoordinator(ctx, f.coordinator(cfg), f.net.Endpoint("coord")); err != nil {
			t.Fatal(err)
		}
		waitSites(t, sites)
		for _, sizes := range got {
			slices.Sort(sizes)
		}
		return got
	}
	small, large := traffic(40, 50), traffic(400, 500)
	for _, kind := range []wire.Kind{wire.KindWeights, wire.KindGradient} {
		if len(small[kind]) == 0 || !slices.Equal(small[kind], large[kind]) {
			t.Errorf("%v envelopes: %d of %d bytes in all at 40 and 50 rows, %d of %d bytes at 400 and 500 rows",
				kind, len(small[kind]), sum(small[kind]), len(large[kind]), sum(large[kind]))
		}
	}
}

func sum(v []int) int {
	var s int
	for _, x := range v {
		s += x
	}
	return s
}

// addEnvelope adds the marshalled envelope of kind carrying ts to f's
// seed corpus.
func addEnvelope(f *testing.F, kind wire.Kind, ts []wire.Tensor) {
	f.Helper()
	e, err := wire.New(wire.Header{RunID: "r", Round: 3, Kind: kind, Sender: "a", Recipient: "b"}, ts)
	if err != nil {
		f.Fatal(err)
	}
	b, err := e.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
}
