package federation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/inference"
)

func TestRestartedSiteRejoins(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newFed(40, 50, 30)
	cfg := testConfig()
	want, err := estimator.Fit(ctx, f.data, testSchema, estimator.GaussianSpectral{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, stopAt := range []int{2, 15, 24} {
		t.Run(fmt.Sprint(stopAt), func(t *testing.T) {
			f := newFed(40, 50, 30)
			var sites []chan siteRun
			others := f.cfgs
			f.cfgs = []SiteConfig{others[0], others[2]}
			sites = f.start(ctx)
			f.cfgs = others
			site2ctx, kill := context.WithCancel(ctx)
			var mu sync.Mutex
			n := 0
			f.net.Intercept = func(b []byte) [][]byte {
				e, _ := wire.Unmarshal(b)
				if e != nil && e.Kind == wire.KindGradient && e.Sender == "site2" {
					mu.Lock()
					if n++; n == stopAt {
						kill()
					}
					mu.Unlock()
				}
				return [][]byte{b}
			}
			second := f.restartSite(site2ctx, ctx, 1, f.cfgs[1], nil)
			var logs logBuffer
			cc := f.rejoinCoordinator(cfg, &logs)
			res, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
			if err != nil {
				t.Fatal(err)
			}
			checkRejoinLogs(t, logs.String(), 1)
			sameModels(t, res, want.Trained, "differs by %g after site2 restarted")
			if r := <-second; r.err != nil || r.res.Global.PlugIn.Estimate != res.GlobalATE {
				t.Fatalf("restarted site2: %v", r.err)
			}
			waitSites(t, sites)
		})
	}
}

// TestSiteRestartedTwiceInOneStepRejoins restarts site2 twice within one
// step: its second process dies after asking to rejoin, before it hears the
// coordinator's answer, and its third asks again at the same step. Each
// process knows nothing of the one before, so the third's request must not
// be taken for a duplicate of the second's; the run must end with the
// uninterrupted run's models. site2's first process dies after sending
// gradient number stopAt, before it hears the next step: 2 puts the two
// restarts in a training step, 24 (its last gradient) in the step of the
// final weights.
func TestSiteRestartedTwiceInOneStepRejoins(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := testConfig()
	sizes := []int{40, 50, 30}
	want, _ := referenceRun(ctx, t, cfg, sizes...)
	for _, stopAt := range []int{2, 24} {
		t.Run(fmt.Sprint(stopAt), func(t *testing.T) {
			f := newFed(sizes...)
			others := f.cfgs
			f.cfgs = []SiteConfig{others[0], others[2]}
			sites := f.start(ctx)
			f.cfgs = others
			// lives[i] is the context of site2's process i+1, of the
			// three; the third runs under ctx.
			lives := make([]context.Context, 2)
			kills := make([]context.CancelFunc, 2)
			for i := range lives {
				lives[i], kills[i] = context.WithCancel(ctx)
				defer kills[i]()
			}
			// lost[i] is closed once the envelopes the coordinator sent
			// process i+1 after its death, up to and including the step's
			// weights, are lost: its successor starts then, so that it
			// hears nothing before the coordinator sends the step again.
			lost := []chan struct{}{make(chan struct{}), make(chan struct{})}
			var mu sync.Mutex
			// life is the index of site2's running process; doomed says
			// it dies on the next envelope the coordinator sends it, and
			// dying that it is dead and not yet replaced.
			life, grads, doomed, dying, closed := 0, 0, false, false, false
			f.net.Intercept = func(b []byte) [][]byte {
				e, err := wire.Unmarshal(b)
				if err != nil {
					return [][]byte{b}
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case e.Recipient == "site2" && (doomed || dying):
					if doomed {
						doomed, dying = false, true
						kills[life]()
					}
					if e.Kind == wire.KindWeights && !closed {
						closed = true
						close(lost[life])
					}
					return nil
				case life == 0 && e.Sender == "site2" && e.Kind == wire.KindGradient:
					grads++
					doomed = grads == stopAt
				case life == 1 && e.Sender == "site2" && e.Kind == wire.KindHello:
					// The second process asks to rejoin; it dies
					// before it hears the answer.
					_, doomed = e.Tensor(tRejoin)
				}
				return [][]byte{b}
			}
			next := func() {
				mu.Lock()
				defer mu.Unlock()
				life++
				dying, closed = false, false
			}
			third := make(chan siteRun, 1)
			go func() {
				for i, l := range lives {
					_, _ = RunSite(l, f.cfgs[1], f.net.Endpoint("site2"))
					<-lost[i]
					next()
				}
				r, err := RunSite(ctx, f.cfgs[1], f.net.Endpoint("site2"))
				third <- siteRun{r, err}
			}()
			var logs logBuffer
			cc := f.rejoinCoordinator(cfg, &logs)
			res, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			if life != 2 {
				t.Errorf("site2 ran %d processes before the last, want 2", life)
			}
			mu.Unlock()
			checkRejoinLogs(t, logs.String(), 2)
			sameModels(t, res, modelsOf(want), "differs by %g after site2 restarted twice")
			if res.GlobalATE != want.GlobalATE || !slices.Equal(res.LocalATE, want.LocalATE) {
				t.Errorf("global ATE %v, local %v; uninterrupted %v, %v", res.GlobalATE, res.LocalATE, want.GlobalATE, want.LocalATE)
			}
			if r := <-third; r.err != nil || r.res.Global.PlugIn.Estimate != res.GlobalATE {
				t.Fatalf("site2's third process: %v", r.err)
			}
			waitSites(t, sites)
		})
	}
}

// TestRejoinHelloChecksTheRowCount hands a site the hello a coordinator
// sends when the site rejoins a run under way, which names the rows the
// site had when the run began. A site with other rows must stop with
// ErrRowsChanged naming itself and the counts, having sent only its
// refusal, and a site with as many must not answer: the coordinator has the handshake's moments and hashes
// already, and fresh ones of edited rows would tell it the edit. A hello
// without the count (from a coordinator that predates it) is answered as
// before.
func TestRejoinHelloChecksTheRowCount(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name  string
		began int // the count in the hello; negative for none
		sends int // envelopes the site answers with
		err   string
	}{
		{"no count", -1, 2, ""},
		{"same rows", 50, 0, ""},
		{"rows added", 48, 1, "site2's table holds 50 rows, the run began with 48"},
		{"rows deleted", 53, 1, "site2's table holds 50 rows, the run began with 53"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent := 0
			cfg := SiteConfig{Name: "site2", Coordinator: "coord", Data: makeData(50, 1), Schema: testSchema,
				Columns: testColumns, Spectral: estimator.GaussianSpectral{},
				Audit: func(_ context.Context, d Direction, _ *wire.Envelope) error {
					if d == Sent {
						sent++
					}
					return nil
				}}
			s := &site{cfg: cfg, conn: NewMemNetwork().Endpoint("site2"), log: slog.New(slog.DiscardHandler)}
			ts := append(configTensors(testConfig()), wire.Scalar(tSiteIndex, 1), wire.Scalar(tSiteCount, 3))
			if tc.began >= 0 {
				ts = append(ts, wire.Scalar(tSiteRows, float64(tc.began)))
			}
			e, err := wire.New(wire.Header{RunID: "run-1", Round: 9, Kind: wire.KindHello, Sender: "coord", Recipient: "site2"}, ts)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.handle(ctx, e)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("hello: %v", err)
			case tc.err != "" && (!errors.Is(err, ErrRowsChanged) || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("hello: %v, want %v saying %q", err, ErrRowsChanged, tc.err)
			}
			if sent != tc.sends {
				t.Errorf("the site answered with %d envelopes, want %d", sent, tc.sends)
			}
		})
	}
}

// TestRestartedSiteWithChangedRowsStops restarts site2 mid-run on a table
// with rows added or deleted since the run began. The restarted site must
// stop with ErrRowsChanged naming itself and the counts, and send nothing
// computed from its rows: only its refusal, a done with the reason code;
// the coordinator stops at once with ErrSiteRefused naming it and the
// reason. No row value may reach a log or the error.
func TestRestartedSiteWithChangedRowsStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name string
		rows int // site2's rows after the restart; 50 before
	}{{"rows added", 52}, {"rows deleted", 47}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFed(40, 50, 30)
			var logs logBuffer
			logger := logs.logger()
			f.cfgs[1].Logger = logger
			again := f.cfgs[1]
			// makeData draws the same rows first, so these are the first
			// life's rows with rows added at the end or the last deleted.
			again.Data = makeData(tc.rows, 1)
			others := f.cfgs
			f.cfgs = []SiteConfig{others[0], others[2]}
			sites := f.start(ctx)
			f.cfgs = others
			site2ctx, kill := context.WithCancel(ctx)
			defer kill()
			var mu sync.Mutex
			n, gone := 0, false
			var after []*wire.Envelope // what site2's second process sent
			f.net.Intercept = func(b []byte) [][]byte {
				e, _ := wire.Unmarshal(b)
				if e == nil || e.Sender != "site2" {
					return [][]byte{b}
				}
				mu.Lock()
				defer mu.Unlock()
				if _, rejoin := e.Tensor(tRejoin); gone && !rejoin {
					after = append(after, e)
				}
				if e.Kind == wire.KindGradient {
					if n++; n == 2 {
						kill()
					}
				}
				return [][]byte{b}
			}
			second := f.restartSite(site2ctx, ctx, 1, again, func() {
				mu.Lock()
				gone = true
				mu.Unlock()
			})
			cc := f.coordinator(testConfig())
			cc.RoundTimeout, cc.Retries = 300*time.Millisecond, 3
			cc.Logger = logger
			_, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
			if want := "site2 refused the run: " + refusalRowsChanged.String(); !errors.Is(err, ErrSiteRefused) || !strings.Contains(err.Error(), want) {
				t.Errorf("coordinator: %v, want %v saying %q", err, ErrSiteRefused, want)
			}
			r := <-second
			want := fmt.Sprintf("site2's table holds %d rows, the run began with 50", tc.rows)
			if !errors.Is(r.err, ErrRowsChanged) || !strings.Contains(r.err.Error(), want) {
				t.Errorf("restarted site2: %v, want %v saying %q", r.err, ErrRowsChanged, want)
			}
			mu.Lock()
			if len(after) != 1 {
				t.Errorf("restarted site2 sent %d envelopes besides its request to rejoin, want its refusal only", len(after))
			} else {
				checkRefusal(t, after[0], refusalRowsChanged)
			}
			mu.Unlock()
			text := logs.String()
			if r.err != nil {
				text += r.err.Error()
			}
			if strings.Contains(text, "value") {
				t.Error("log mentions values")
			}
			for _, d := range []*estimator.Data{f.data[1], again.Data} {
				for _, v := range slices.Concat(d.X.RawMatrix().Data, d.Y) {
					if v != math.Trunc(v) && strings.Contains(text, strconv.FormatFloat(v, 'g', -1, 64)) {
						t.Fatalf("a row value of site2 (%v) is in the log or the error", v)
					}
				}
			}
			for _, ch := range sites {
				if r := <-ch; !errors.Is(r.err, ErrRefused) {
					t.Errorf("other site: %v, want %v", r.err, ErrRefused)
				}
			}
		})
	}
}

// logBuffer collects the log lines of loggers used from several
// goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was logged so far.
func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// logger returns a text logger writing into l.
func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// rejoinCoordinator returns the coordinator configuration of the rejoin
// tests: short rounds with retries enough for a restarted site to come
// back, logging into logs.
func (f *fed) rejoinCoordinator(cfg estimator.Config, logs *logBuffer) CoordinatorConfig {
	cc := f.coordinator(cfg)
	cc.RoundTimeout, cc.Retries = 500*time.Millisecond, 5
	cc.Logger = logs.logger()
	return cc
}

// checkRejoinLogs fails the test unless the coordinator's log records at
// least min rejoins and never mentions values.
func checkRejoinLogs(t *testing.T, log string, min int) {
	t.Helper()
	if n := strings.Count(log, "site rejoins the run"); n < min {
		t.Errorf("site2 rejoined %d times, want at least %d", n, min)
	}
	if strings.Contains(log, "value") {
		t.Error("log mentions values")
	}
}

// TestSiteRejoinsAtTheGlobalATE restarts site2 in the last step of a run,
// before it hears the global ATE: once while the coordinator waits for the
// sites' done, and once while the coordinator is down after saving the
// local ATEs (State.Finish), so that the resumed coordinator meets the
// restarted site. The new process knows nothing of the run, not even its
// final weights; it must still publish what an uninterrupted run's site2
// publishes.
func TestSiteRejoinsAtTheGlobalATE(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := testConfig()
	sizes := []int{40, 50, 30}
	want, refSites := referenceRun(ctx, t, cfg, sizes...)
	want2 := refSites[1]
	for _, coordDown := range []bool{false, true} {
		t.Run(fmt.Sprintf("coordinator down %v", coordDown), func(t *testing.T) {
			f := newFed(sizes...)
			others := f.cfgs
			f.cfgs = []SiteConfig{others[0], others[2]}
			sites := f.start(ctx)
			f.cfgs = others
			site2ctx, kill := context.WithCancel(ctx)
			defer kill()
			cctx, stop := context.WithCancel(ctx)
			defer stop()
			var mu sync.Mutex
			killed, gone, down := false, false, false
			var published []*SiteResult // by site2's second process
			f.net.Intercept = func(b []byte) [][]byte {
				e, err := wire.Unmarshal(b)
				if err != nil {
					return [][]byte{b}
				}
				mu.Lock()
				defer mu.Unlock()
				if down && e.Sender == "coord" {
					// What a stopping coordinator still sends is lost:
					// the sites must hear the global ATE from the
					// resumed one.
					return nil
				}
				if e.Recipient != "site2" {
					return [][]byte{b}
				}
				if !coordDown && !killed && e.Kind == wire.KindGlobalATE {
					killed = true
					kill()
				}
				if killed && !gone {
					return nil // lost with the killed process; the coordinator sends it again
				}
				return [][]byte{b}
			}
			c := f.cfgs[1]
			c.Publish = func(_ context.Context, r *SiteResult) error {
				mu.Lock()
				defer mu.Unlock()
				published = append(published, r)
				return nil
			}
			second := f.restartSite(site2ctx, ctx, 1, c, func() {
				mu.Lock()
				gone = true
				mu.Unlock()
			})
			var logs logBuffer
			cc := f.rejoinCoordinator(cfg, &logs)
			if coordDown {
				cp := &hookCheckpoints{}
				cp.saved = func(*State) {
					// Stop the coordinator, and kill site2, once the
					// local ATEs are saved.
					st, err := cp.Load(ctx)
					if err != nil || st == nil || st.Finish == nil {
						return
					}
					mu.Lock()
					defer mu.Unlock()
					if !killed {
						killed, down = true, true
						kill()
						stop()
					}
				}
				cc.Checkpoints, cc.CheckpointEvery = cp, 2
				runUntilStopped(t, cctx, cc, f)
				mu.Lock()
				down = false
				mu.Unlock()
			}
			res, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
			if err != nil {
				select {
				case r := <-second:
					t.Fatalf("coordinator: %v; restarted site2: %v", err, r.err)
				case <-time.After(time.Second):
					t.Fatalf("coordinator: %v", err)
				}
			}
			checkRejoinLogs(t, logs.String(), 1)
			if !strings.Contains(logs.String(), "local ATE matches the recorded one") {
				t.Error("the rejoined site's local ATE was not checked")
			}
			if strings.Contains(logs.String(), "differs") {
				t.Errorf("the rejoined site's local ATE differs from the recorded one:\n%s", logs.String())
			}
			if res.GlobalATE != want.GlobalATE || res.GlobalAIPW != want.GlobalAIPW || !slices.Equal(res.LocalATE, want.LocalATE) {
				t.Errorf("result %+v, uninterrupted %+v", res, want)
			}
			r := <-second
			if r.err != nil {
				t.Fatalf("restarted site2: %v", r.err)
			}
			got := r.res
			if !sameATE(got.Global, want2.Global) || !sameATE(got.Local, want2.Local) || !slices.Equal(got.Kept, want2.Kept) ||
				!slices.Equal(got.Peers, want2.Peers) || got.Index != want2.Index {
				t.Errorf("restarted site2: global %+v local %+v, uninterrupted global %+v local %+v", got.Global, got.Local, want2.Global, want2.Local)
			}
			for _, k := range estimator.Kinds {
				if !slices.Equal(got.Lambda[k], want2.Lambda[k]) || got.Rounds[k] != want2.Rounds[k] {
					t.Errorf("restarted site2, %s: λ %v after %d rounds, uninterrupted %v after %d", k, got.Lambda[k], got.Rounds[k], want2.Lambda[k], want2.Rounds[k])
				}
			}
			ge, we := got.Effects, want2.Effects
			for name, p := range map[string][2][]float64{"cate": {ge.CATE, we.CATE}, "sd": {ge.SD, we.SD}, "lower": {ge.Lower, we.Lower},
				"upper": {ge.Upper, we.Upper}, "y0": {ge.Y0, we.Y0}, "y1": {ge.Y1, we.Y1}, "propensity": {ge.Propensity, we.Propensity}} {
				if !slices.Equal(p[0], p[1]) {
					t.Errorf("restarted site2: %s differs from the uninterrupted run's", name)
				}
			}
			mu.Lock()
			if len(published) != 1 || published[0] != got {
				t.Errorf("restarted site2 published %d times, want once", len(published))
			}
			mu.Unlock()
			for _, ch := range sites {
				if r := <-ch; r.err != nil || r.res.Global.PlugIn.Estimate != want.GlobalATE {
					t.Fatalf("other site: %v", r.err)
				}
			}
		})
	}
}

// TestRecheckATELogsADifferenceWithoutValues checks what the coordinator
// logs when a site that rejoined at the global-ate step answers a local ATE
// other than the one recorded: a warning naming the site, no value.
func TestRecheckATELogsADifferenceWithoutValues(t *testing.T) {
	var logs strings.Builder
	c := &coordinator{cfg: CoordinatorConfig{Name: "coord", RunID: "run-1", Sites: []string{"site1", "site2"}},
		log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{} // its digits could look like a value
			}
			return a
		}})),
		st: &State{RunID: "run-1", Finish: &FinishState{LocalATE: []float64{0.25, 1.5},
			AIPW:    []inference.Sums{{N: 40, Sum: 10, SumSq: 30}, {N: 50, Sum: 75, SumSq: 200}},
			Clipped: []int{0, 3}, Done: []bool{true, false}}}}
	for _, tc := range []struct {
		ate  float64
		n    float64
		want string
	}{{1.5, 50, "matches"}, {1.75, 50, "differs"}, {1.5, 49, "differs"}, {1.5, 50.5, "unreadable"}} {
		logs.Reset()
		e, err := wire.New(wire.Header{RunID: "run-1", Round: 30, Kind: wire.KindATE, Sender: "site2", Recipient: "coord"},
			[]wire.Tensor{wire.Scalar(tATE, tc.ate), wire.Scalar(tN, tc.n), wire.Scalar(tAIPWSum, 75), wire.Scalar(tAIPWSumSq, 200), wire.Scalar(tClipped, 3)})
		if err != nil {
			t.Fatal(err)
		}
		c.recheckATE(1, e)
		got := logs.String()
		if !strings.Contains(got, tc.want) || !strings.Contains(got, "site=site2") {
			t.Errorf("ATE %v over %v rows: logged %q, want it to say %q naming site2", tc.ate, tc.n, got, tc.want)
		}
		for _, v := range []string{"1.5", "1.75", "75", "200", "49", "50"} {
			if strings.Contains(got, v) {
				t.Errorf("log %q holds the value %s", got, v)
			}
		}
	}
}

// sameATE reports whether a and b are identical, NaN fields included:
// %v prints the shortest decimal that parses back to the same float64.
func sameATE(a, b inference.ATEs) bool { return fmt.Sprintf("%v", a) == fmt.Sprintf("%v", b) }
