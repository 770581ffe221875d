package federation

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
)

// TestSiteLimitsRefuseTheRun: a run whose configuration passes a site's
// Limits is refused in answer to its hello, before the site sends anything
// computed from its rows (its moments): the site sends one refusal, for
// refusalLimit, and returns ErrLimit naming the setting; the coordinator
// stops naming the site.
func TestSiteLimitsRefuseTheRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name   string
		limits Limits
		cfg    func(*estimator.Config)
		msg    string
	}{
		{"features", Limits{Features: 8}, func(c *estimator.Config) { c.Features = 9 }, "features 9 > 8"},
		{"latent and draws", Limits{Latent: 1, Draws: 2}, func(c *estimator.Config) { c.Latent, c.Draws = 2, 3 }, "latent 2 > 1, draws 3 > 2"},
		{"samples", Limits{Samples: 5}, func(c *estimator.Config) { c.Samples = 6 }, "samples 6 > 5"},
		{"rounds", Limits{Rounds: 7}, func(c *estimator.Config) { c.Rounds = 8 }, "rounds 8 > 7"},
		{"batches of one row", Limits{}, func(c *estimator.Config) { c.Method, c.BatchSize = estimator.Adam, 1 }, "batch_size 1 < 256"},
		{"transfer", Limits{Transfers: []estimator.Transfer{estimator.NoTransfer}}, func(c *estimator.Config) { c.Transfer = estimator.Learned }, "transfer learned not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFed(40, 40)
			f.cfgs[0].Limits = tc.limits
			f.cfgs[1].Limits = Limits{MinBatch: 1}
			sent := f.recordSent("site1")
			sites := f.start(ctx)
			cfg := testConfig()
			tc.cfg(&cfg)
			_, err := RunCoordinator(ctx, f.coordinator(cfg), f.net.Endpoint("coord"))
			if !errors.Is(err, ErrSiteRefused) || !strings.Contains(err.Error(), "site1") {
				t.Errorf("coordinator: %v, want ErrSiteRefused naming site1", err)
			}
			r := <-sites[0]
			if !errors.Is(r.err, ErrLimit) || !strings.Contains(r.err.Error(), tc.msg) {
				t.Errorf("site1: %v, want ErrLimit saying %q", r.err, tc.msg)
			}
			<-sites[1]
			env := sent.envelopes()
			if len(env) != 1 {
				t.Fatalf("site1 sent %d envelopes, want the refusal alone", len(env))
			}
			checkRefusal(t, env[0], refusalLimit)
		})
	}
}

// TestDefaultLimitsAcceptTheDefaults: the default configuration, and a
// site smaller than its batch, pass the default limits.
func TestDefaultLimitsAcceptTheDefaults(t *testing.T) {
	if err := (Limits{}).check(estimator.DefaultConfig(), 1_000_000); err != nil {
		t.Errorf("default configuration at a million rows: %v", err)
	}
	cfg := estimator.DefaultConfig()
	cfg.BatchSize = 10
	if err := (Limits{}).check(cfg, 10); err != nil {
		t.Errorf("batches of 10 at a site of 10 rows (every row each round): %v", err)
	}
}

// TestSiteCountsRounds: a site answers at most the round limit of each
// model in a run; a further kernel's model is another model.
func TestSiteCountsRounds(t *testing.T) {
	s := &site{cfg: SiteConfig{Limits: Limits{Rounds: 2}}, answered: map[string]int{}}
	for r := range 2 {
		if err := s.countRound(modelName(estimator.Outcome, 0)); err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
	}
	if err := s.countRound(modelName(estimator.Latent, 0)); err != nil {
		t.Errorf("another model's first round: %v", err)
	}
	if err := s.countRound(modelName(estimator.Outcome, 1)); err != nil {
		t.Errorf("another kernel's outcome model's first round: %v", err)
	}
	if err := s.countRound(modelName(estimator.Outcome, 0)); !errors.Is(err, ErrLimit) {
		t.Errorf("third outcome round: %v, want ErrLimit", err)
	}
}

// TestDecodeConfigRefusesWhatIsNotACount: an integer setting must arrive as
// a whole number in range; int() would have truncated or wrapped it into
// another setting. (NaN and infinities never get this far: wire.New and
// wire.Unmarshal refuse them.)
func TestDecodeConfigRefusesWhatIsNotACount(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    float64
	}{
		{"config.features", 2.5}, {"config.features", -1}, {"config.rounds", 1e300},
		{"config.draws", 0.5}, {"config.seed_lo", float64(1 << 33)}, {"config.samples", float64(1 << 40)},
	} {
		ts := configTensors(testConfig())
		for i := range ts {
			if ts[i].Name == tc.name {
				ts[i] = wire.Scalar(tc.name, tc.v)
			}
		}
		e, err := wire.New(wire.Header{RunID: "r", Kind: wire.KindHello, Sender: "coord", Recipient: "site1"}, ts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeConfig(e); !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s = %v: error %v, want ErrProtocol naming it", tc.name, tc.v, err)
		}
	}
	e, err := wire.New(wire.Header{RunID: "r", Kind: wire.KindHello, Sender: "coord", Recipient: "site1"}, configTensors(testConfig()))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodeConfig(e); err != nil || got.Seed != testConfig().Seed {
		t.Errorf("the test configuration: %v (seed %d), want it back", err, got.Seed)
	}
}

// smallBatches lets f's sites compute rounds on mini-batches of any size,
// as the tests of small batches on small sites need.
func (f *fed) smallBatches() {
	for i := range f.cfgs {
		f.cfgs[i].Limits.MinBatch = 1
	}
}
