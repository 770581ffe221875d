package federation

import (
	"context"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/balance"
	"github.com/crffd/crffd/federation/wire"
)

// TestGlobalBalanceFromSums checks that every site receives the sum of the
// sites' balance sums, each computed on the site's own rows, so that the
// global balance equals the one of the pooled sums; and that one private
// site, which sends none, leaves every site without a global balance,
// unless its privacy.exact names balance.
func TestGlobalBalanceFromSums(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := newFed(40, 60, 50)
	var want balance.Sums
	local := make([]balance.Sums, len(f.data))
	for s, d := range f.data {
		sums, err := balance.Of(ctx, d.X, d.W)
		if err != nil {
			t.Fatal(err)
		}
		local[s] = sums
		if s == 0 { // a copy: Add changes want's slices
			want, err = balance.FromVector(sums.Dim(), sums.Vector())
		} else {
			err = want.Add(sums)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	sites := f.start(ctx)
	if _, err := RunCoordinator(ctx, f.coordinator(testConfig()), f.net.Endpoint("coord")); err != nil {
		t.Fatal(err)
	}
	for s, r := range waitSites(t, sites) {
		if r.Balance == nil {
			t.Fatalf("site%d: no global balance", s+1)
		}
		if i, ok := sameSums(*r.Balance, want); !ok {
			t.Fatalf("site%d: number %d of the global sums is %v, want %v", s+1, i, r.Balance.Vector()[i], want.Vector()[i])
		}
		if r.Balance.N[balance.Treated]+r.Balance.N[balance.Control] != 150 {
			t.Errorf("site%d: global balance over %v rows, want 150", s+1, r.Balance.N)
		}
		// The site's own sums, kept from its hello, are those of its rows.
		if r.LocalBalance == nil {
			t.Errorf("site%d: no local balance sums", s+1)
		} else if i, ok := sameSums(*r.LocalBalance, local[s]); !ok {
			t.Errorf("site%d: number %d of the local sums is %v, want %v", s+1, i, r.LocalBalance.Vector()[i], local[s].Vector()[i])
		}
	}

	// A private site sends no balance sums unless privacy.exact names
	// balance, which sends them exactly: the global balance is then the
	// same as without privacy.
	for _, tc := range []struct {
		name  string
		exact []string
	}{{"private", nil}, {"private, balance exact", []string{ExactRowCount, ExactBalance}}} {
		t.Run(tc.name, func(t *testing.T) {
			f2 := newFed(40, 60, 50)
			f2.cfgs[1].Privacy = &SitePrivacy{Epsilon: 8, Delta: 1e-5, Clip: 1, Ledger: &memoryLedger{}, Bounds: testBounds, Outcome: &testOutcomeBound,
				Exact: tc.exact}
			sites := f2.start(ctx)
			if _, err := RunCoordinator(ctx, f2.coordinator(testConfig()), f2.net.Endpoint("coord")); err != nil {
				t.Fatal(err)
			}
			sent := tc.exact != nil
			for s, r := range waitSites(t, sites) {
				switch {
				case !sent && r.Balance != nil:
					t.Errorf("site%d: a global balance although site2 is private and sent no sums", s+1)
				case sent && r.Balance == nil:
					t.Errorf("site%d: no global balance although site2 names balance exact", s+1)
				case sent:
					if i, ok := sameSums(*r.Balance, want); !ok {
						t.Errorf("site%d: number %d of the global sums is %v, want %v", s+1, i, r.Balance.Vector()[i], want.Vector()[i])
					}
				}
				if (r.LocalBalance == nil) != (s == 1 && !sent) {
					t.Errorf("site%d: local balance sums %v; only a private site2 without balance exact keeps none", s+1, r.LocalBalance)
				}
			}
		})
	}
}

// sameSums reports whether a and b agree to 1e-9 relative, and if not the
// first number that differs.
func sameSums(a, b balance.Sums) (int, bool) {
	x, y := a.Vector(), b.Vector()
	if len(x) != len(y) {
		return 0, false
	}
	for i := range y {
		if math.Abs(x[i]-y[i]) > 1e-9*math.Max(1, math.Abs(y[i])) {
			return i, false
		}
	}
	return 0, true
}

// TestPoolBalanceNamesABadSite: sums that do not decode leave the run
// without a global balance, and the coordinator's log names the site.
func TestPoolBalanceNamesABadSite(t *testing.T) {
	d := 1
	good := balance.Sums{N: [2]float64{3, 2}, W: [2]float64{4, 3}, WW: [2]float64{6, 5},
		Sum: [2][]float64{{1}, {2}}, SumSq: [2][]float64{{3}, {4}}, WSum: [2][]float64{{1}, {3}}}
	bad := good.Vector()
	bad[0] = 2.5 // not a count
	hello := func(site string, v []float64) map[wire.Kind]*wire.Envelope {
		e, err := wire.New(wire.Header{RunID: "r", Kind: wire.KindHello, Sender: site, Recipient: "coord"},
			[]wire.Tensor{wire.Vector(tBalanceSums, v)})
		if err != nil {
			t.Fatal(err)
		}
		return map[wire.Kind]*wire.Envelope{wire.KindHello: e}
	}
	var logs logBuffer
	c := &coordinator{cfg: CoordinatorConfig{Sites: []string{"site1", "site2"}}, log: slog.New(slog.NewTextHandler(&logs, nil))}
	got := c.poolBalance([]map[wire.Kind]*wire.Envelope{hello("site1", good.Vector()), hello("site2", good.Vector())}, d)
	if len(got) != 8+6*d || got[0] != 6 || got[8] != 2 {
		t.Errorf("pooled sums %v, want twice site1's", got)
	}
	if got := c.poolBalance([]map[wire.Kind]*wire.Envelope{hello("site1", good.Vector()), hello("site2", bad)}, d); got != nil {
		t.Errorf("pooled %v from a site whose sums do not decode", got)
	}
	if !strings.Contains(logs.String(), "site=site2") || !strings.Contains(logs.String(), "do not decode") {
		t.Errorf("log %q does not name site2", logs.String())
	}
}
