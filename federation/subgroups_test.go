package federation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/selection"
)

// TestFederatedSubgroups: each site evaluates the subgroups its policy
// allows on its own rows and sends their sums; the global effect of each
// is the stratified AIPW estimate over the sites that sent them, equal to
// the formula on the sites' own scores, and every site gets it that at
// least two other sites sent sums of (the others get it withheld). A
// group with a small arm, one whose complement is a small cell, and a
// group no policy allows, are sent by none.
func TestFederatedSubgroups(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := newFed(150, 160, 140)
	// The predicates name a rule on the first covariate, which the test's
	// SubgroupRows applies as the site's SQL would.
	rules := map[string]func(x float64, i int) bool{
		"x0 > 0":  func(x float64, _ int) bool { return x > 0 },
		"x0 <= 0": func(x float64, _ int) bool { return x <= 0 },
		"id < 4":  func(_ float64, i int) bool { return i < 4 },
		"id != 7": func(_ float64, i int) bool { return i != 7 },
		"refused": nil,
	}
	for s := range f.cfgs {
		d := f.data[s]
		f.cfgs[s].SubgroupRows = func(_ context.Context, pred string) ([]bool, error) {
			rule, ok := rules[pred]
			if !ok || rule == nil {
				return nil, fmt.Errorf("predicate refused: %q", pred)
			}
			in := make([]bool, d.Rows())
			for i := range in {
				in[i] = rule(d.X.At(i, 0), i)
			}
			return in, nil
		}
	}
	f.cfgs[0].Subgroups = SubgroupPolicy{Any: true}
	f.cfgs[1].Subgroups = SubgroupPolicy{Any: true}
	f.cfgs[2].Subgroups = SubgroupPolicy{Names: []string{"positive"}, Approved: approved(map[string]string{"positive": " x0 > 0"})}
	sent := f.recordSent("site3")
	sites := f.start(ctx)
	cc := f.coordinator(testConfig())
	cc.Subgroups = []Subgroup{{"positive", "x0 > 0"}, {"rest", "x0 <= 0"}, {"tiny", "id < 4"}, {"bad", "refused"}, {"all-but-one", "id != 7"}}
	res, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
	if err != nil {
		t.Fatal(err)
	}
	rs := waitSites(t, sites)
	want := map[string][]int{"positive": {0, 1, 2}, "rest": {0, 1}}
	for i, g := range cc.Subgroups {
		got := res.GATE[i]
		covers, ok := want[g.Name]
		if !ok {
			if got != nil {
				t.Errorf("%s: a global effect %+v, want none", g.Name, got)
			}
			continue
		}
		if got == nil || !slices.Equal(got.Sites, covers) {
			t.Fatalf("%s: %+v, want one over sites %v", g.Name, got, covers)
		}
		// The stratified formula on the sites' own scores.
		var within, sum, cate float64
		var n, treated int
		for _, s := range covers {
			r := rs[s]
			var k, sk, sq float64
			for _, row := range r.Kept {
				if !rules[g.Predicate](f.data[s].X.At(row, 0), row) {
					continue
				}
				p := r.Scores[row]
				k, sk, sq = k+1, sk+p, sq+p*p
				cate += r.CATE[row]
				treated += int(f.data[s].W[row])
			}
			within += sq - sk*sk/k
			sum += sk
			n += int(k)
		}
		mean, se := sum/float64(n), math.Sqrt(within/(float64(n)*float64(n-len(covers))))
		if math.Abs(got.Estimate.Estimate-mean) > 1e-9 || math.Abs(got.Estimate.SE-se) > 1e-9 || got.N != n || got.Treated != treated ||
			got.Control != n-treated || math.Abs(got.PlugIn-cate/float64(n)) > 1e-9 {
			t.Errorf("%s: %+v, want %v ± %v over %d rows (%d treated), plug-in %v", g.Name, got, mean, se, n, treated, cate/float64(n))
		}
		for s, r := range rs {
			want := fmt.Sprintf("%+v", got)
			if others := len(covers); slices.Contains(covers, s) && others-1 < 2 {
				want = fmt.Sprintf("%+v", &GlobalGATE{Name: g.Name, Withheld: true})
			}
			if fmt.Sprintf("%+v", r.GlobalGATE[i]) != want {
				t.Errorf("site %d: %s is %+v, want %v", s+1, g.Name, r.GlobalGATE[i], want)
			}
		}
	}
	// Site 3 sent the one group its policy names, and nothing else.
	for _, e := range sent.envelopes() {
		for _, ts := range e.Tensors() {
			if strings.HasPrefix(ts.Name, pGate) && ts.Name != "gate.0.sums" {
				t.Errorf("site3 sent %s", ts.Name)
			}
		}
	}
}

// approved is a SubgroupPolicy.Approved of the predicates by name.
func approved(preds map[string]string) func(context.Context, string) (string, bool, error) {
	return func(_ context.Context, name string) (string, bool, error) {
		p, ok := preds[name]
		return p, ok, nil
	}
}

// TestSubgroupsAPeerCannotSingleOut plays a coordinator that tries to get
// one row's ψ and CATE out of a site: a group of every row but one, whose
// sums the site's ATE sums would give the row away from (refused by the
// complement's cell size), and the same predicate sent under a name the
// site approved with another predicate (refused as not the approved one).
// The site sends no sums of either, and says why in its log.
func TestSubgroupsAPeerCannotSingleOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := newFed(150, 160, 140)
	for s := range f.cfgs {
		d := f.data[s]
		f.cfgs[s].SubgroupRows = func(_ context.Context, pred string) ([]bool, error) {
			in := make([]bool, d.Rows())
			for i := range in {
				in[i] = pred == "x0 > 0" && d.X.At(i, 0) > 0 || pred == "id != 7" && i != 7
			}
			return in, nil
		}
	}
	f.cfgs[0].Subgroups = SubgroupPolicy{Any: true}
	f.cfgs[1].Subgroups = SubgroupPolicy{Names: []string{"positive"}, Approved: approved(map[string]string{"positive": "x0 > 0"})}
	f.cfgs[2].Subgroups = SubgroupPolicy{Names: []string{"positive"}} // names without an approved predicate
	var logs [3]strings.Builder
	for s := range f.cfgs {
		f.cfgs[s].Logger = slog.New(slog.NewTextHandler(&logs[s], nil))
	}
	sent := f.recordSent("")
	sites := f.start(ctx)
	cc := f.coordinator(testConfig())
	cc.Subgroups = []Subgroup{{"all-but-one", "id != 7"}, {"positive", "id != 7"}}
	res, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
	if err != nil {
		t.Fatal(err)
	}
	waitSites(t, sites)
	if res.GATE[0] != nil || res.GATE[1] != nil {
		t.Errorf("global effects %+v %+v, want none", res.GATE[0], res.GATE[1])
	}
	for _, e := range sent.envelopes() {
		for _, ts := range e.Tensors() {
			if strings.HasPrefix(ts.Name, pGate) {
				t.Errorf("%s sent %s", e.Sender, ts.Name)
			}
		}
	}
	for s, want := range []string{"its complement has 1 to", "differs from the one the site approved", "approved no predicate under its name"} {
		if !strings.Contains(logs[s].String(), want) {
			t.Errorf("site%d's log does not say %q", s+1, want)
		}
	}
}

func TestCheckSubgroups(t *testing.T) {
	long := strings.Repeat("x", MaxSubgroupBytes+1)
	for _, c := range []struct {
		gs   []Subgroup
		want string
	}{
		{[]Subgroup{{"", "a > 1"}}, "a name of 1 to"},
		{[]Subgroup{{"a", "b > 1"}, {"a", "c > 1"}}, `subgroup "a" is named twice`},
		{[]Subgroup{{"a", ""}}, `subgroup "a": a predicate of 1 to 4096 bytes`},
		{[]Subgroup{{"a", long}}, `subgroup "a": a predicate of 1 to 4096 bytes`},
		{make([]Subgroup, MaxSubgroups+1), "65 subgroups, at most 64"},
	} {
		if err := CheckSubgroups(c.gs); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%d subgroups: %v, want %q", len(c.gs), err, c.want)
		}
	}
}

// FuzzDecodeSubgroups feeds arbitrary bytes, as a coordinator or a site
// could send them, to the decoders of subgroups, their sums and their
// global effects. They must never panic, and what they accept must obey
// the limits: at most MaxSubgroups subgroups of checked names and
// predicates, counts that are counts, sites within the federation.
// Run with: go test -fuzz FuzzDecodeSubgroups ./federation
func FuzzDecodeSubgroups(f *testing.F) {
	gs := []Subgroup{{"old", "age >= 65"}, {"women", "sex = 1"}}
	gates := []*GlobalGATE{{Name: "old", N: 30, Treated: 10, Control: 20, Estimate: inference.Estimate{Estimate: 1, SE: 0.2, Lower: 0.6, Upper: 1.4}, PlugIn: 0.9, Sites: []int{0, 2}}, nil}
	for _, ts := range [][]wire.Tensor{
		subgroupTensors(gs),
		{wire.Vector("gate.0.sums", []float64{10, 5, 9, 12, 20, 40, 3})},
		globalGateTensors(gates, 1),
		globalGateTensors(gates, 0), // withheld from a site that sent sums, with one other
	} {
		addEnvelope(f, wire.KindWeights, ts)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := wire.Unmarshal(b)
		if err != nil {
			return
		}
		if got, err := decodeSubgroups(e); err == nil && CheckSubgroups(got) != nil {
			t.Fatalf("accepted subgroups %q", got)
		}
		if sums, err := decodeGateSums(e, 2, 50); err == nil {
			for _, g := range sums {
				if g != nil && (g[0] < 0 || g[3] < 0 || g[0]+g[3] > 50) {
					t.Fatalf("accepted sums %v", g)
				}
			}
		}
		if got, err := decodeGlobalGATEs(e, gs, 3); err == nil {
			for _, g := range got {
				if g != nil && !g.Withheld && (g.N < 0 || g.N != g.Treated+g.Control || len(g.Sites) == 0 || slices.ContainsFunc(g.Sites, func(s int) bool { return s < 0 || s >= 3 })) {
					t.Fatalf("accepted %+v", g)
				}
			}
		}
	})
}

// TestChoiceTensorsMembers: under a choice per site the chosen ensemble
// holds every site's members; each site is sent its own, or the
// federation's, with their own regressions in the same order, whatever
// other sites chose before them.
func TestChoiceTensorsMembers(t *testing.T) {
	ridge := func(v float64) *estimator.Ridge { return &estimator.Ridge{Beta: []float64{v, v}} }
	cands := []selection.Candidate{
		{Name: "dr/1", Kind: selection.KindDR, Ridge: 1},
		{Name: "dr/10", Kind: selection.KindDR, Ridge: 10},
		{Name: "dr/100", Kind: selection.KindDR, Ridge: 100},
	}
	ests := []selection.Estimator{{Kind: selection.KindDR, Ridge: 1, DR: ridge(1)}, {Kind: selection.KindDR, Ridge: 10, DR: ridge(10)}, {Kind: selection.KindDR, Ridge: 100, DR: ridge(100)}}
	scores := make([]selection.Score, 3)
	// The federation chose dr/100; site 0 chose dr/1 and dr/10 of its own.
	ens := selection.Ensemble{Members: []int{2}, Sites: []selection.Centring{{Members: []int{0, 1}}, {}}}
	st := &SelectState{Scored: true, Ensemble: ens}
	st.Candidates, st.Estimators = selection.Ensembled(cands, ests, scores, ens)
	st.Chosen = len(st.Candidates) - 1
	for site, want := range [][]float64{{1, 10}, {100}} {
		ts, err := st.choiceTensors(site)
		if err != nil {
			t.Fatal(err)
		}
		e, err := wire.New(wire.Header{RunID: "r", Round: 3, Kind: wire.KindWeights, Sender: "a", Recipient: "b"}, ts)
		if err != nil {
			t.Fatal(err)
		}
		sent, err := decodeCandidates(e, []string{"k"}, 10)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeEnsemble(e, sent)
		if err != nil {
			t.Fatalf("site %d: %v", site, err)
		}
		var betas []float64
		for _, m := range got.Members {
			betas = append(betas, m.DR.Beta[0])
		}
		if !slices.Equal(betas, want) {
			t.Errorf("site %d decodes members of penalties %v, want %v", site, betas, want)
		}
	}
}

// TestSubgroupDecodersRefuse: sums and global effects that no rows could
// have are refused, as a site's ATE sums are: an empty arm with sums,
// Σψ² < (Σψ)²/n (which would make the pooled interval too narrow), counts
// beyond what a float64 holds exactly, and a global effect whose counts
// or interval do not add up.
func TestSubgroupDecodersRefuse(t *testing.T) {
	gs := []Subgroup{{"a", "x > 1"}}
	for _, v := range [][]float64{
		{0, 1e6, 1e12, 10, 1, 1, 0},
		{10, 100, 0, 10, 100, 2000, 0},
		{10, 1, 1, 10, 100, 0, 0},
	} {
		e, err := wire.New(wire.Header{RunID: "r", Round: 1, Kind: wire.KindATE, Sender: "s", Recipient: "c"}, []wire.Tensor{wire.Vector("gate.0.sums", v)})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := decodeGateSums(e, 1, 100); !errors.Is(err, ErrProtocol) {
			t.Errorf("sums %v: %v, %v; want ErrProtocol", v, got, err)
		}
	}
	for _, v := range [][]float64{
		{1e300, 1e300, 0, 1, 0.1, 0.8, 1.2, 1},
		{1 << 53, 1 << 52, 1 << 52, 1, 0.1, 0.8, 1.2, 1},
		{30, 10, 10, 1, 0.1, 0.8, 1.2, 1},
		{30, 10, 20, 2, 0.1, 0.8, 1.2, 1},
	} {
		e, err := wire.New(wire.Header{RunID: "r", Round: 1, Kind: wire.KindGlobalATE, Sender: "c", Recipient: "s"},
			[]wire.Tensor{wire.Vector("gate.0.global", v), wire.Vector("gate.0.sites", []float64{0, 1})})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := decodeGlobalGATEs(e, gs, 3); !errors.Is(err, ErrProtocol) {
			t.Errorf("global %v: %+v, %v; want ErrProtocol", v, got, err)
		}
	}
}

// TestGlobalGATEOverflow: sites' finite sums that pool to a figure no
// envelope can carry leave that subgroup without a global effect, and the
// others with theirs, rather than failing the run at its last step.
func TestGlobalGATEOverflow(t *testing.T) {
	big, fine := &GateSums{5, 0, 0, 5, 1e308, 1e308, 0}, &GateSums{5, 5, 10, 5, 10, 30, 4}
	gl := globalGATEs([]Subgroup{{"a", "x > 1"}, {"b", "x > 2"}}, [][]*GateSums{{big, fine}, {big, fine}, {big, fine}})
	if gl[0] != nil || gl[1] == nil {
		t.Fatalf("global effects %+v, %+v: want none of the overflowing one and one of the other", gl[0], gl[1])
	}
	if _, err := wire.New(wire.Header{RunID: "r", Round: 1, Kind: wire.KindGlobalATE, Sender: "c", Recipient: "s"}, globalGateTensors(gl, 0)); err != nil {
		t.Fatal(err)
	}
}

// TestSubgroupsCheckpoint: the subgroup sums of a checkpoint survive it,
// nil entries included; a checkpoint with sums of more sites than its
// run is refused; and a coordinator configured with other subgroups
// than its checkpoint's does not resume it.
func TestSubgroupsCheckpoint(t *testing.T) {
	g := &GateSums{5, 1.25, 3, 6, 2, 4, 0.1}
	finish := func(gates [][]*GateSums) *FinishState {
		return &FinishState{LocalATE: make([]float64, 2), AIPW: []inference.Sums{{N: 20}, {N: 20}}, Clipped: make([]int, 2), Done: make([]bool, 2), Gates: gates}
	}
	st := &State{Sites: []string{"a", "b"}, Finish: finish([][]*GateSums{{g, nil}, {nil, g}})}
	b, err := EncodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	if *back.Finish.Gates[0][0] != *g || back.Finish.Gates[0][1] != nil || back.Finish.Gates[1][0] != nil || *back.Finish.Gates[1][1] != *g {
		t.Errorf("gates %v after a checkpoint, want %v", back.Finish.Gates, st.Finish.Gates)
	}
	for _, gates := range [][][]*GateSums{{{g}, {g}, {g}}, {{&GateSums{30, 0, 0, 1, 0, 0, 0}}, {nil}}} {
		st.Finish = finish(gates)
		b, err := EncodeState(st)
		if err == nil {
			_, err = DecodeState(b)
		}
		if err == nil {
			t.Errorf("a checkpoint of two sites of 20 rows with the subgroup sums %v loads", gates)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := newFed(60, 80)
	cc := f.coordinator(testConfig())
	cc.Checkpoints = &memCheckpoints{}
	cc.Subgroups = []Subgroup{{"old", "age >= 65"}}
	if err := cc.Checkpoints.Save(ctx, &State{RunID: "r", Sites: cc.Sites, Subgroups: []Subgroup{{"old", "age >= 60"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord")); !errors.Is(err, ErrCheckpointSubgroups) {
		t.Errorf("resumed with another predicate: %v, want ErrCheckpointSubgroups", err)
	}
}
