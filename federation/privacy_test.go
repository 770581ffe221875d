package federation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
)

// TestFewPositiveOutcomesAreNotSentInTheLogMoments plants outcomes at
// site1 that are positive in one or two rows only, as a zero-inflated
// outcome (a cost, a length of stay) is at a small site, and scans every
// envelope site1 sends in a whole run. The log moments (rows with y > 0,
// Σ log y, Σ (log y)²) are taken over those rows alone, so min_arm_rows
// does not cover them: over one row, Σ log y is that row's log outcome;
// over two, the sum and the sum of squares give both outcomes as the roots
// of a quadratic. The pooled log transform needs every row positive, so a
// site with a row y ≤ 0 must send zeros, which disables it as before. A
// site whose every outcome is positive still sends its log moments.
func TestFewPositiveOutcomesAreNotSentInTheLogMoments(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sentinels := []float64{13.579246801357913, 11.235813213455891}
	for _, tc := range []struct {
		name     string
		positive int // rows of site1 with y > 0; -1 for every row
	}{{"one positive outcome", 1}, {"two positive outcomes", 2}, {"every outcome positive", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFed(40, 40)
			d := f.data[0]
			for i := range d.Y {
				switch {
				case tc.positive < 0:
					d.Y[i] = math.Abs(d.Y[i]) + 0.5
				case i < tc.positive:
					d.Y[i] = sentinels[i]
				default:
					d.Y[i] = -math.Abs(d.Y[i])
				}
			}
			// What an observer of site1's envelopes must not find: each
			// sentinel, its log and its squared log, and over two rows the
			// sums the site would compute of them.
			var forbidden []float64
			var lsum, lsumsq float64
			for _, v := range sentinels[:max(tc.positive, 0)] {
				l := math.Log(v)
				lsum += l
				lsumsq += l * l
				forbidden = append(forbidden, v, l, l*l)
			}
			if tc.positive > 1 {
				forbidden = append(forbidden, lsum, lsumsq)
			}
			var mu sync.Mutex
			var sent []*wire.Envelope
			f.cfgs[0].Audit = func(_ context.Context, dir Direction, e *wire.Envelope) error {
				if dir == Sent {
					mu.Lock()
					sent = append(sent, e)
					mu.Unlock()
				}
				return nil
			}
			sites := f.start(ctx)
			if _, err := RunCoordinator(ctx, f.coordinator(testConfig()), f.net.Endpoint("coord")); err != nil {
				t.Fatal(err)
			}
			waitSites(t, sites)
			mu.Lock()
			defer mu.Unlock()
			var log []float64
			for _, e := range sent {
				for _, ts := range e.Tensors() {
					for _, v := range ts.Values {
						if slices.Contains(forbidden, v) {
							t.Errorf("site1's %s carries %v in tensor %q, from its %d positive outcomes", e.Kind, v, ts.Name, tc.positive)
						}
					}
					if ts.Name == tMomentsLog {
						log = ts.Values
					}
				}
			}
			mo := d.Moments()
			want := []float64{0, 0, 0}
			if tc.positive < 0 {
				want = []float64{float64(mo.N), mo.LogSum, mo.LogSumSq}
			}
			if !slices.Equal(log, want) {
				t.Errorf("site1 sent %s = %v, want %v", tMomentsLog, log, want)
			}
		})
	}
}

// TestVerdictCannotChangeTheRowsOfARun hands a site a second
// dedup-verdict in the run it has joined. The verdict decides which rows
// the gradients sum over; a coordinator that could change it mid-run could
// ask for gradients at the same weights over two row sets that differ by
// one row, and the difference would be that row's term, from which its
// covariates and outcome can be solved. The run's own verdict again (as a
// rejoin may send it) is accepted; one that leaves out other rows stops the
// site with ErrProtocol. A site that sent no identity hashes has no
// duplicates, so a verdict that leaves out any of its rows is refused too.
func TestVerdictCannotChangeTheRowsOfARun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data := makeData(40, 0)
	scaler, err := estimator.NewScaler(testSchema, []estimator.Moments{data.Moments()})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]wire.Digest, data.Rows())
	for i := range ids {
		ids[i] = IdentityHMAC([]byte("sites only"), []string{fmt.Sprintf("person %d", i)})
	}
	for _, tc := range []struct {
		name          string
		hashes        bool  // the site sends identity hashes
		first, second []int // the rows each verdict leaves out; second nil for no second verdict
		err           string
	}{
		{"no hashes, nothing left out", false, []int{}, nil, ""},
		{"no hashes, a row left out", false, []int{3}, nil, "sent no identity hashes"},
		{"the run's verdict again", true, []int{3, 7}, []int{3, 7}, ""},
		{"another row left out", true, []int{3}, []int{3, 7}, "another dedup-verdict"},
		{"a row put back", true, []int{3, 7}, []int{3}, "another dedup-verdict"},
		{"other rows left out", true, []int{3}, []int{7}, "another dedup-verdict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := SiteConfig{Name: "site1", Coordinator: "coord", Data: data, Schema: testSchema,
				Columns: testColumns, Spectral: estimator.GaussianSpectral{}}
			if tc.hashes {
				cfg.Identities = ids
			}
			s := &site{cfg: cfg, conn: NewMemNetwork().Endpoint("site1"), log: slog.New(slog.DiscardHandler)}
			envelope := func(round uint64, kind wire.Kind, ts []wire.Tensor) *wire.Envelope {
				e, err := wire.New(wire.Header{RunID: "run-1", Round: round, Kind: kind, Sender: "coord", Recipient: "site1"}, ts)
				if err != nil {
					t.Fatal(err)
				}
				return e
			}
			verdict := func(round uint64, drop []int) *wire.Envelope {
				return envelope(round, wire.KindDedupVerdict, append(scalerTensors(scaler), wire.Vector(tDedupDrop, ints(drop))))
			}
			hello := envelope(1, wire.KindHello, append(configTensors(testConfig()), wire.Scalar(tSiteIndex, 0), wire.Scalar(tSiteCount, 2)))
			steps := []*wire.Envelope{hello, verdict(2, tc.first)}
			if tc.second != nil {
				steps = append(steps, verdict(7, tc.second))
			}
			for _, e := range steps {
				if _, err = s.handle(ctx, e); err != nil {
					break
				}
			}
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("site: %v", err)
			case tc.err != "" && (!errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("site: %v, want %v saying %q", err, ErrProtocol, tc.err)
			case tc.err == "" && s.train.Rows() != data.Rows()-len(tc.first):
				t.Errorf("site trains on %d rows, want %d", s.train.Rows(), data.Rows()-len(tc.first))
			}
		})
	}
}
