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

	"github.com/crffd/crffd/federation/wire"
)

// sentBy records the envelopes a site sends over f's network.
type sentBy struct {
	mu  sync.Mutex
	env []*wire.Envelope
}

// recordSent records what site sends ("": every party).
func (f *fed) recordSent(site string) *sentBy {
	r := &sentBy{}
	f.net.Intercept = func(b []byte) [][]byte {
		if e, _ := wire.Unmarshal(b); e != nil && (site == "" || e.Sender == site) {
			r.mu.Lock()
			r.env = append(r.env, e)
			r.mu.Unlock()
		}
		return [][]byte{b}
	}
	return r
}

func (r *sentBy) envelopes() []*wire.Envelope {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.env)
}

// checkRefusal fails the test unless e is a refusal for why that carries
// the status and the reason code and nothing else: no count or value
// computed from the site's rows.
func checkRefusal(t *testing.T, e *wire.Envelope, why refusal) {
	t.Helper()
	if e.Kind != wire.KindDone {
		t.Fatalf("refusal is a %s, want done", e.Kind)
	}
	var names []string
	for _, ts := range e.Tensors() {
		names = append(names, ts.Name)
	}
	if got := strings.Join(names, ","); got != tStatus+","+tRefusalReason || len(e.DigestLists()) != 0 {
		t.Errorf("refusal carries tensors %s and %d digest lists, want %s,%s only", got, len(e.DigestLists()), tStatus, tRefusalReason)
	}
	if v, err := scalar(e, tStatus); err != nil || v != -1 {
		t.Errorf("refusal status %v (%v), want -1", v, err)
	}
	if v, err := integer(e, tRefusalReason); err != nil || refusal(v) != why {
		t.Errorf("refusal reason %v (%v), want %d", v, err, why)
	}
}

// TestSiteRefusalStopsTheRun has a site refuse the run for each reason a
// site may: too few rows in an arm of its table or after de-duplication,
// and rows that differ too little from an earlier run's (SiteConfig.Join).
// The site must return its own error and send one refusal, after what it
// sent before it knew, and the coordinator must stop at once, well within
// its round timeout, naming the site and the reason, and tell the other
// site the run is aborted. A Join hook that fails for another reason is no
// refusal: that site sends nothing, and the coordinator stops with
// ErrSilent as before.
func TestSiteRefusalStopsTheRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	secret := []byte("sites only")
	armRows := func(treated, least int) func(*fed) {
		return func(f *fed) {
			d := f.data[0]
			for i := range d.W {
				d.W[i] = 0
				if i < treated {
					d.W[i] = 1
				}
			}
			f.cfgs[0].MinArmRows = least
		}
	}
	var joined []string
	failure := errors.New("site2: the site file is locked")
	join := func(err error) func(*fed) {
		return func(f *fed) {
			joined = nil
			f.cfgs[1].Join = func(_ context.Context, run string) error {
				joined = append(joined, run)
				return err
			}
		}
	}
	for _, tc := range []struct {
		name    string
		setup   func(*fed)
		site    int    // the refusing site
		siteErr error  // what it returns (errors.Is)
		siteMsg string // and says
		why     refusal
		sent    string // the kinds it sends, refusal last
	}{
		{"few treated, default minimum", armRows(3, 0), 0, ErrTooFewRows,
			"site site1 has 3 treated and 37 control rows in its table; each arm needs at least 5", refusalTooFewRows, "done"},
		{"few control, configured minimum", armRows(32, 10), 0, ErrTooFewRows,
			"site site1 has 32 treated and 8 control rows in its table; each arm needs at least 10", refusalTooFewRows, "done"},
		{"few treated after de-duplication", func(f *fed) {
			// site2's treated rows are all patients site1 also holds.
			for s := range f.cfgs {
				ids := make([]wire.Digest, 40)
				for i := range ids {
					person := fmt.Sprintf("person %d-%d", s, i)
					if s == 1 && f.data[1].W[i] == 1 {
						person = fmt.Sprintf("person 0-%d", i)
					}
					ids[i] = IdentityHMAC(secret, []string{person})
				}
				f.cfgs[s].Identities = ids
			}
		}, 1, ErrTooFewRows, "after de-duplication", refusalTooFewRows, "hello,dedup-hashes,done"},
		{"rows differ too little from an earlier run", join(fmt.Errorf("site2: 2 rows changed since run-0: %w", ErrTooFewChanged)), 1,
			ErrTooFewChanged, "site2: 2 rows changed since run-0", refusalTooFewChanged, "done"},
		{"join fails otherwise", join(failure), 1, failure, failure.Error(), refusalUnknown, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFed(40, 40)
			tc.setup(f)
			name := f.names[tc.site]
			sent := f.recordSent(name)
			sites := f.start(ctx)
			cc := f.coordinator(testConfig())
			cc.RoundTimeout, cc.Retries = time.Minute, 1
			if tc.why == refusalUnknown {
				cc.RoundTimeout = 300 * time.Millisecond
			}
			_, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
			if tc.why == refusalUnknown {
				if !errors.Is(err, ErrSilent) || !strings.Contains(err.Error(), name) {
					t.Errorf("coordinator: %v, want ErrSilent naming %s", err, name)
				}
			} else {
				want := fmt.Sprintf("%s refused the run: %s", name, tc.why)
				if !errors.Is(err, ErrSiteRefused) || !strings.Contains(err.Error(), want) {
					t.Errorf("coordinator: %v, want ErrSiteRefused saying %q", err, want)
				}
				if got := FaultySites(err); !slices.Equal(got, []string{name}) {
					t.Errorf("FaultySites: %v, want [%s]", got, name)
				}
				// It stopped on the refusal, not on waiting: the round
				// timeout of a minute would have ended it with ErrSilent.
			}
			r := <-sites[tc.site]
			if !errors.Is(r.err, tc.siteErr) || !strings.Contains(r.err.Error(), tc.siteMsg) {
				t.Fatalf("%s: %v, want %v saying %q", name, r.err, tc.siteErr, tc.siteMsg)
			}
			if tc.why != refusalUnknown {
				if r := <-sites[1-tc.site]; !errors.Is(r.err, ErrRefused) {
					t.Errorf("other site: %v, want %v", r.err, ErrRefused)
				}
			}
			env := sent.envelopes()
			var kinds []string
			for _, e := range env {
				kinds = append(kinds, e.Kind.String())
			}
			if got := strings.Join(kinds, ","); got != tc.sent {
				t.Fatalf("%s sent %s, want %s", name, got, tc.sent)
			}
			if tc.why != refusalUnknown {
				checkRefusal(t, env[len(env)-1], tc.why)
			}
			// The site's Audit hook saw what it sent, the refusal included.
			f.mu.Lock()
			var audited []string
			for _, a := range f.audits[name] {
				if kind, ok := strings.CutPrefix(a, fmt.Sprint(Sent)+" "); ok {
					audited = append(audited, kind)
				}
			}
			f.mu.Unlock()
			if got := strings.Join(audited, ","); got != tc.sent {
				t.Errorf("%s audited %s sent, want %s", name, got, tc.sent)
			}
			if f.cfgs[1].Join != nil && strings.Join(joined, ",") != "run-1" {
				t.Errorf("Join called with %q, want run-1 once", joined)
			}
		})
	}
}

// TestRefusalFromAnUnknownReason checks what a coordinator makes of a
// refusal whose code it does not know (a newer site's) or that lacks one:
// it stops the run naming the site, and says the code.
func TestRefusalFromAnUnknownReason(t *testing.T) {
	for _, tc := range []struct {
		name string
		ts   []wire.Tensor
		want string
	}{
		{"newer code", []wire.Tensor{wire.Scalar(tStatus, -1), wire.Scalar(tRefusalReason, 9)},
			"site2 refused the run: for a reason this coordinator does not know (code 9)"},
		{"no code", []wire.Tensor{wire.Scalar(tStatus, -1)},
			"site2 refused the run: for a reason this coordinator does not know (code 0)"},
		{"known code", []wire.Tensor{wire.Scalar(tStatus, -1), wire.Scalar(tRefusalReason, float64(refusalRowsChanged))},
			"site2 refused the run: its rows changed since the run began"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &coordinator{cfg: CoordinatorConfig{Name: "coord", RunID: "run-1", Sites: []string{"site1", "site2"}}}
			e, err := wire.New(wire.Header{RunID: "run-1", Round: 1, Kind: wire.KindDone, Sender: "site2", Recipient: "coord"}, tc.ts)
			if err != nil {
				t.Fatal(err)
			}
			err = c.refused(1, e)
			if !errors.Is(err, ErrSiteRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want ErrSiteRefused saying %q", err, tc.want)
			}
			if c.refuser != "site2" {
				t.Errorf("refuser %q, want site2", c.refuser)
			}
		})
	}
}
