package federation

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRowsAreReadWhenTheRunBegins: a site with SiteConfig.Rows takes part
// in a run with the rows it returns when the run's hello arrives, not with
// those it was started with, so that a long-lived site trains each run on
// its table as it is then; and a site whose rows cannot be read stops
// before it sends anything.
func TestRowsAreReadWhenTheRunBegins(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newFed(40, 50)
	later := makeData(45, 0) // site1's table when the run begins
	calls := 0
	f.cfgs[0].Rows = func(context.Context) (SiteRows, error) {
		calls++
		return SiteRows{Data: later, Schema: testSchema, Columns: testColumns}, nil
	}
	sites := f.start(ctx)
	res, err := RunCoordinator(ctx, f.coordinator(testConfig()), f.net.Endpoint("coord"))
	if err != nil {
		t.Fatal(err)
	}
	got := waitSites(t, sites)
	if calls != 1 || res.Rows[0] != 45 || len(got[0].Effects.CATE) != 45 {
		t.Errorf("site1 read its rows %d times, trained on %d and scored %d, want once, 45 and 45",
			calls, res.Rows[0], len(got[0].Effects.CATE))
	}

	f = newFed(40, 50)
	unreadable := errors.New("disk gone")
	f.cfgs[0].Rows = func(context.Context) (SiteRows, error) { return SiteRows{}, unreadable }
	sites = f.start(ctx)
	cc := f.coordinator(testConfig())
	cc.RoundTimeout, cc.Retries = 200*time.Millisecond, 1
	if _, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord")); !errors.Is(err, ErrSilent) {
		t.Errorf("coordinator: %v, want ErrSilent", err)
	}
	if r := <-sites[0]; !errors.Is(r.err, unreadable) {
		t.Errorf("site1: %v, want its read error", r.err)
	}
	<-sites[1]
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.audits["site1"] {
		if a[0] == '0' { // Sent
			t.Errorf("site1 sent %s after failing to read its rows", a)
		}
	}
}
