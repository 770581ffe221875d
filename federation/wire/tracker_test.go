package wire_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/crffd/crffd/federation/wire"
)

func TestTracker(t *testing.T) {
	env := func(run string, round uint64, kind wire.Kind, sender string, v float64) *wire.Envelope {
		h := wire.Header{RunID: run, Model: "latent", Round: round, Kind: kind, Sender: sender, Recipient: "coordinator"}
		return mustNew(t, h, []wire.Tensor{wire.Scalar("loss", v)})
	}
	tr := wire.NewTracker("run-2", 5)
	steps := []struct {
		name    string
		advance uint64 // advance to this round first, when non-zero
		e       *wire.Envelope
		want    wire.Verdict
		err     error
		msg     string
	}{
		{"current", 0, env("run-2", 5, wire.KindGradient, "site-a", 1), wire.Current, nil, ""},
		{"same again", 0, env("run-2", 5, wire.KindGradient, "site-a", 1), wire.Duplicate, wire.ErrDuplicate, "already received"},
		{"other site", 0, env("run-2", 5, wire.KindGradient, "site-b", 1), wire.Current, nil, ""},
		{"other payload", 0, env("run-2", 5, wire.KindGradient, "site-a", 2), wire.Current, nil, ""},
		{"other kind", 0, env("run-2", 5, wire.KindATE, "site-a", 1), wire.Current, nil, ""},
		{"past round", 0, env("run-2", 4, wire.KindGradient, "site-a", 1), wire.Stale, wire.ErrStale, "round 4 is past, the current round is 5"},
		{"other run", 0, env("run-1", 5, wire.KindGradient, "site-a", 3), wire.Stale, wire.ErrStale, `run "run-1" is not the current run "run-2"`},
		{"future", 0, env("run-2", 6, wire.KindGradient, "site-a", 1), wire.Future, wire.ErrFuture, "ahead"},
		{"after advance", 6, env("run-2", 6, wire.KindGradient, "site-a", 1), wire.Current, nil, ""},
		{"replay of round 5", 0, env("run-2", 5, wire.KindGradient, "site-a", 1), wire.Stale, wire.ErrStale, "past"},
		{"duplicate in round 6", 6, env("run-2", 6, wire.KindGradient, "site-a", 1), wire.Duplicate, wire.ErrDuplicate, "gradient"},
	}
	for _, s := range steps {
		if s.advance != 0 {
			if err := tr.Advance(s.advance); err != nil {
				t.Fatal(err)
			}
		}
		v, err := tr.Admit(s.e)
		if v != s.want || !errors.Is(err, s.err) || (err != nil && !strings.Contains(err.Error(), s.msg)) {
			t.Errorf("%s: Admit = %v, %v; want %v, %v containing %q", s.name, v, err, s.want, s.err, s.msg)
		}
		var we *wire.Error
		if err != nil && (!errors.As(err, &we) || we.Header != s.e.Header) {
			t.Errorf("%s: error %v does not carry the header", s.name, err)
		}
	}
	if err := tr.Advance(3); !errors.Is(err, wire.ErrRewind) {
		t.Errorf("Advance backwards = %v", err)
	}
	tr.Reset("run-3", 0)
	if run, round := tr.Position(); run != "run-3" || round != 0 {
		t.Errorf("Position = %s, %d", run, round)
	}
	if v, _ := tr.Admit(env("run-3", 0, wire.KindHello, "site-a", 1)); v != wire.Current {
		t.Errorf("after Reset: %v", v)
	}
	for v, s := range map[wire.Verdict]string{wire.Current: "current", wire.Duplicate: "duplicate", wire.Stale: "stale", wire.Future: "future", 9: "Verdict(9)"} {
		if v.String() != s {
			t.Errorf("%d.String() = %q", int(v), v.String())
		}
	}
}

func TestTrackerConcurrentDuplicates(t *testing.T) {
	tr := wire.NewTracker("run", 1)
	e := mustNew(t, wire.Header{RunID: "run", Round: 1, Kind: wire.KindDone, Sender: "coordinator", Recipient: "site-a"}, nil)
	var mu sync.Mutex
	current := 0
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if v, _ := tr.Admit(e); v == wire.Current {
				mu.Lock()
				current++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if current != 1 {
		t.Errorf("%d copies admitted as current, want 1", current)
	}
}
