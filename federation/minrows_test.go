package federation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/federation/wire"
)

func TestTooFewRowsInAnArmSendsNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name    string
		treated int
		min     int
		want    string
	}{
		{"few treated, default minimum", 3, 0, "site site1 has 3 treated and 37 control rows in its table; each arm needs at least 5"},
		{"few control, configured minimum", 32, 10, "site site1 has 32 treated and 8 control rows in its table; each arm needs at least 10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFed(40)
			d := f.data[0]
			for i := range d.W {
				d.W[i] = 0
				if i < tc.treated {
					d.W[i] = 1
				}
			}
			f.cfgs[0].MinArmRows = tc.min
			sites := f.start(ctx)
			r := <-sites[0]
			if !errors.Is(r.err, ErrTooFewRows) {
				t.Fatalf("err %v, want ErrTooFewRows", r.err)
			}
			if !strings.Contains(r.err.Error(), tc.want) {
				t.Errorf("err %q, want it to contain %q", r.err, tc.want)
			}
			if a := f.audits["site1"]; len(a) != 0 {
				t.Errorf("site audited %v, want nothing sent or received", a)
			}
		})
	}
}

// A site whose treated rows are all duplicates of another site's must not
// train on a control arm alone: it stops after the verdict, having sent only
// its hello and its identity hashes.
func TestTooFewRowsAfterDeduplicationStopsBeforeTraining(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := newFed(40, 40)
	secret := []byte("sites only")
	for s := range f.cfgs {
		ids := make([]wire.Digest, 40)
		for i := range ids {
			person := fmt.Sprintf("person %d-%d", s, i)
			if s == 1 && f.data[1].W[i] == 1 {
				person = fmt.Sprintf("person 0-%d", i) // a patient site1 also holds
			}
			ids[i] = IdentityHMAC(secret, []string{person})
		}
		f.cfgs[s].Identities = ids
	}
	sites := f.start(ctx)
	cc := f.coordinator(testConfig())
	cc.RoundTimeout, cc.Retries = 300*time.Millisecond, 1
	if _, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord")); !errors.Is(err, ErrSilent) {
		t.Errorf("coordinator: %v, want ErrSilent", err)
	}
	r := <-sites[1]
	if !errors.Is(r.err, ErrTooFewRows) || !strings.Contains(r.err.Error(), "after de-duplication") {
		t.Fatalf("site2: %v, want ErrTooFewRows after de-duplication", r.err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var sent []string
	for _, a := range f.audits["site2"] {
		if kind, ok := strings.CutPrefix(a, fmt.Sprint(Sent)+" "); ok {
			sent = append(sent, kind)
		}
	}
	if got := strings.Join(sent, ","); got != "hello,dedup-hashes" {
		t.Errorf("site2 sent %s, want only hello,dedup-hashes", got)
	}
}

// A site whose Join hook refuses a run answers nothing to its hello: it
// returns the hook's error as it is, having sent nothing, and the
// coordinator stops naming it.
func TestJoinRefusalSendsNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := newFed(40, 40)
	refusal := errors.New("site2: refused by the test")
	var joined []string
	f.cfgs[1].Join = func(_ context.Context, run string) error {
		joined = append(joined, run)
		return refusal
	}
	sites := f.start(ctx)
	cc := f.coordinator(testConfig())
	cc.RoundTimeout, cc.Retries = 300*time.Millisecond, 1
	if _, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord")); !errors.Is(err, ErrSilent) || !strings.Contains(err.Error(), "site2") {
		t.Errorf("coordinator: %v, want ErrSilent naming site2", err)
	}
	if r := <-sites[1]; r.err != refusal {
		t.Fatalf("site2: %v, want the hook's error as it is", r.err)
	}
	if got := strings.Join(joined, ","); got != "run-1" {
		t.Errorf("Join called with %q, want run-1 once", got)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.audits["site2"] {
		if strings.HasPrefix(a, fmt.Sprint(Sent)+" ") {
			t.Errorf("site2 sent %s after refusing the run", a)
		}
	}
}
