package federation

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/crffd/crffd/balance"
	"github.com/crffd/crffd/positivity"
)

// TestGlobalBalanceFromSums checks that every site receives the sum of the
// sites' balance sums, each computed on the site's own rows, so that the
// global balance equals the one of the pooled sums; and that one private
// site, which sends none, leaves every site without a global balance.
func TestGlobalBalanceFromSums(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := newFed(40, 60, 50)
	var want balance.Sums
	for s, d := range f.data {
		e, err := balance.Propensity(ctx, d.X, d.W)
		if err != nil {
			t.Fatal(err)
		}
		sums, err := balance.Collect(d.X, d.W, e, positivity.Low, positivity.High)
		if err != nil {
			t.Fatal(err)
		}
		if s == 0 {
			want = sums
		} else if err := want.Add(sums); err != nil {
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
		got, w := r.Balance.Vector(), want.Vector()
		for i := range w {
			if math.Abs(got[i]-w[i]) > 1e-9*math.Max(1, math.Abs(w[i])) {
				t.Fatalf("site%d: number %d of the global sums is %v, want %v", s+1, i, got[i], w[i])
			}
		}
		if r.Balance.N[balance.Treated]+r.Balance.N[balance.Control] != 150 {
			t.Errorf("site%d: global balance over %v rows, want 150", s+1, r.Balance.N)
		}
	}

	f2 := newFed(40, 60, 50)
	f2.cfgs[1].Privacy = &SitePrivacy{Epsilon: 8, Delta: 1e-5, Clip: 1, Ledger: &memoryLedger{}}
	cfg := testConfig()
	sites = f2.start(ctx)
	if _, err := RunCoordinator(ctx, f2.coordinator(cfg), f2.net.Endpoint("coord")); err != nil {
		t.Fatal(err)
	}
	for s, r := range waitSites(t, sites) {
		if r.Balance != nil {
			t.Errorf("site%d: a global balance although site2 is private and sent no sums", s+1)
		}
	}
}
