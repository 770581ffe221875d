package federation

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/estimator"
)

// stateSeeds are coordinator states as JSON: what DecodeState must read,
// and what it must refuse without panicking.
var stateSeeds = []struct {
	name, json string
	ok         bool
}{
	{"saved before the finish phase was kept", `{"RunID":"r","Sites":["a","b"],"Step":3,"Kind":3}`, true},
	{"finish phase", `{"RunID":"r","Sites":["a","b"],"Step":40,"Kind":3,"Finish":{"LocalATE":[1.5,-2],"AIPW":[{"N":40,"Sum":60,"SumSq":100},{"N":50,"Sum":-100,"SumSq":300}],"Clipped":[0,1],"Done":[true,false]}}`, true},
	{"finish phase of an old coordinator", `{"RunID":"r","Sites":["a","b"],"Step":40,"Kind":3,"Finish":{"LocalATE":[1.5,-2],"LocalSE":[0.1,0.2],"Rows":[40,50],"Done":[true,false]}}`, false},
	{"more clipped rows than rows", `{"RunID":"r","Sites":["a"],"Step":40,"Kind":3,"Finish":{"LocalATE":[1.5],"AIPW":[{"N":39,"Sum":60,"SumSq":100}],"Clipped":[40],"Done":[true]}}`, false},
	{"finish phase of another site count", `{"Sites":["a","b"],"Finish":{"LocalATE":[1.5],"AIPW":[{"N":40}],"Clipped":[0],"Done":[true]}}`, false},
	{"finish phase without confirmations", `{"Sites":["a"],"Finish":{"LocalATE":[1.5],"AIPW":[{"N":40}],"Clipped":[0]}}`, false},
	{"negative row count", `{"Sites":["a"],"Finish":{"LocalATE":[1.5],"AIPW":[{"N":-1}],"Clipped":[0],"Done":[false]}}`, false},
	{"negative transfer matrix", `{"Trained":[{"Lambda":{"Rows":-1,"Cols":-1,"Data":[1]}}]}`, false},
	{"negative weight block", `{"Trained":[{"Lambda":{"Rows":1,"Cols":1,"Data":[1]},"Weights":[{"b":{"Rows":-1,"Cols":-2,"Data":[1,2]}}]}]}`, false},
	{"overflowing weight block", `{"Trained":[{"Lambda":{"Rows":1,"Cols":1,"Data":[1]},"Weights":[{"b":{"Rows":4294967296,"Cols":4294967296,"Data":[]}}]}]}`, false},
	{"not JSON", `{"Sites":`, false},
}

func TestDecodeState(t *testing.T) {
	for _, c := range stateSeeds {
		t.Run(c.name, func(t *testing.T) {
			st, err := DecodeState([]byte(c.json))
			if (err == nil) != c.ok {
				t.Fatalf("DecodeState: %v, want ok %v", err, c.ok)
			}
			if err == nil && st.Finish != nil && len(st.Finish.Done) != len(st.Sites) {
				t.Errorf("finish phase of %d sites for %d sites", len(st.Finish.Done), len(st.Sites))
			}
		})
	}
}

// FuzzDecodeState feeds arbitrary bytes to DecodeState, as a damaged or
// foreign coordinator file would. It must never panic, and what it accepts
// must encode and decode again. Run with: go test -fuzz FuzzDecodeState ./federation
func FuzzDecodeState(f *testing.F) {
	for _, c := range stateSeeds {
		f.Add([]byte(c.json))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := DecodeState(b)
		if err != nil {
			return
		}
		if st.Finish != nil && st.Finish.check(len(st.Sites)) != nil {
			t.Fatalf("accepted an inconsistent finish phase: %+v", st.Finish)
		}
		again, err := EncodeState(st)
		if err != nil {
			t.Fatalf("encode what was decoded: %v", err)
		}
		if _, err := DecodeState(again); err != nil {
			t.Fatalf("decode what was encoded: %v", err)
		}
	})
}

func TestEndOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want RunStatus
	}{
		{nil, RunCompleted},
		{fmt.Errorf("site2 %w: reason", ErrSiteRefused), RunRefused},
		{&RunError{RunID: "r", Err: fmt.Errorf("%w: 3 treated", ErrTooFewRows)}, RunRefused},
		{fmt.Errorf("%w: %w: covariate", ErrRefused, ErrSchema), RunRefused},
		{fmt.Errorf("%w: the coordinator aborted run r", ErrRefused), RunFailed},
		{fmt.Errorf("%w: site3", ErrSilent), RunFailed},
	} {
		e := EndOf("r", tc.err)
		if e.Status != tc.want || e.Run != "r" || (tc.err != nil) != (e.Reason != "") {
			t.Errorf("%v: %+v, want %s", tc.err, e, tc.want)
		}
	}
}

// TestStateFloatsAreBinary: a checkpoint's vectors travel as the base64 of
// their bits, exact to the bit and smaller than decimal text, and states
// saved as decimal arrays before read the same.
func TestStateFloatsAreBinary(t *testing.T) {
	x := []float64{0.1, -1e-300, math.MaxFloat64, 1.0 / 3, 0}
	st := &State{RunID: "r", Sites: []string{"a"}, Kind: 1,
		Checkpoint: &estimator.Checkpoint{Model: estimator.Outcome, Sites: 1, Method: estimator.Adam, Round: 3, X: x, M: x, V: x, Step: 3,
			History: []estimator.Iterate{{X: x, Gradient: x, F: 2.5, Round: 1}}},
		Trained: []*estimator.Trained{{Model: estimator.Propensity, Shared: map[string][]float64{"a": x},
			Weights: []map[string]*mat.Dense{{"W": mat.NewDense(1, 5, x)}}, Lambda: mat.NewSymDense(1, []float64{1}), Rounds: 4}}}
	b, err := EncodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "0.1,") || strings.Contains(string(b), "1.7976931348623157e+308") {
		t.Errorf("floats written as decimals: %s", b)
	}
	back, err := DecodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]float64{"X": back.Checkpoint.X, "M": back.Checkpoint.M, "V": back.Checkpoint.V,
		"history X": back.Checkpoint.History[0].X, "shared": back.Trained[0].Shared["a"], "weights": back.Trained[0].Weights[0]["W"].RawRowView(0)} {
		for i := range x {
			if math.Float64bits(got[i]) != math.Float64bits(x[i]) {
				t.Errorf("%s[%d] = %v, want %v", name, i, got[i], x[i])
			}
		}
	}
	old := `{"RunID":"r","Sites":["a"],"Kind":1,"Checkpoint":{"Model":1,"Sites":1,"Method":1,"Round":3,"X":[0.1,2],"M":[0,0],"V":[0,0],"Step":3},
		"Trained":[{"Model":0,"Weights":[{"W":{"Rows":1,"Cols":2,"Data":[0.5,1.5]}}],"Shared":{"a":[0.25]},"Lambda":{"Rows":1,"Cols":1,"Data":[1]},"Rounds":4}]}`
	st2, err := DecodeState([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if st2.Checkpoint.X[0] != 0.1 || st2.Trained[0].Weights[0]["W"].At(0, 1) != 1.5 || st2.Trained[0].Shared["a"][0] != 0.25 {
		t.Errorf("a decimal state reads as %+v", st2)
	}
	if _, err := DecodeState([]byte(`{"Checkpoint":{"X":"AAAA"}}`)); err == nil {
		t.Error("a vector of 3 bytes decoded")
	}
}

// TestRoundsBetweenSaves: a coordinator resumed from a checkpoint skips the
// steps it may have sent since: Every rounds, or when it saved by time any
// number up to maxRoundsBetweenSaves.
func TestRoundsBetweenSaves(t *testing.T) {
	for _, tc := range []struct {
		st   State
		want uint64
	}{
		{State{Every: 5}, 5},
		{State{}, 1}, // saved before Every existed, or by model only
		{State{Every: 0, Interval: time.Second}, maxRoundsBetweenSaves},
		{State{Every: 5, Interval: time.Second}, maxRoundsBetweenSaves},
	} {
		if got := tc.st.roundsBetweenSaves(); got != tc.want {
			t.Errorf("every %d, interval %v: %d, want %d", tc.st.Every, tc.st.Interval, got, tc.want)
		}
	}
}

func TestWithoutAndSubsequence(t *testing.T) {
	all := []string{"a", "b", "c", "d"}
	if got := Without(all, []string{"d", "b"}); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("Without: %v", got)
	}
	for _, tc := range []struct {
		sub  []string
		want bool
	}{{nil, true}, {[]string{"a", "c"}, true}, {all, true}, {[]string{"c", "a"}, false}, {[]string{"e"}, false}, {[]string{"a", "a"}, false}} {
		if got := Subsequence(tc.sub, all); got != tc.want {
			t.Errorf("Subsequence(%v): %v, want %v", tc.sub, got, tc.want)
		}
	}
	if FaultySites(errors.New("other")) != nil {
		t.Error("FaultySites of an error that blames no site")
	}
}
