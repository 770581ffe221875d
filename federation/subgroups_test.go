package federation

import (
	"context"
	"fmt"
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
// the formula on the sites' own scores, and every site gets it. A group
// with a small arm, and a group no policy allows, are sent by none.
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
	f.cfgs[2].Subgroups = SubgroupPolicy{Names: []string{"positive"}}
	sent := f.recordSent("site3")
	sites := f.start(ctx)
	cc := f.coordinator(testConfig())
	cc.Subgroups = []Subgroup{{"positive", "x0 > 0"}, {"rest", "x0 <= 0"}, {"tiny", "id < 4"}, {"bad", "refused"}}
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
			if fmt.Sprintf("%+v", r.GlobalGATE[i]) != fmt.Sprintf("%+v", got) {
				t.Errorf("site %d: %s is %+v, the coordinator's %+v", s+1, g.Name, r.GlobalGATE[i], got)
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
		globalGateTensors(gates),
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
				if g != nil && (g.N < 0 || len(g.Sites) == 0 || slices.ContainsFunc(g.Sites, func(s int) bool { return s < 0 || s >= 3 })) {
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
