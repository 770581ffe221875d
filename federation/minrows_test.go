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
