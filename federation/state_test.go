package federation

import (
	"context"
	"fmt"
	"testing"
	"time"
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

func TestStateDBRunLog(t *testing.T) {
	ctx := context.Background()
	db, err := OpenStateDB(ctx, t.TempDir()+"/coord.sqlite", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, e := range []RunEnd{EndOf("r1", ErrSilent), EndOf("r2", nil)} {
		if err := db.LogRun(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.RunLog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[{r1 failed site silent} {r2 completed }]" {
		t.Errorf("run log %v", got)
	}
}
