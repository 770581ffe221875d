package federation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
)

func TestCoordinatorResumesFromCheckpoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := testConfig()
	ref := newFed(40, 50)
	want, err := estimator.Fit(ctx, ref.data, testSchema, estimator.GaussianSpectral{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, stopAt := range []int{3, 8, 11, 16, 20, 24} {
		t.Run(fmt.Sprint(stopAt), func(t *testing.T) {
			cp := stopAndResume(ctx, t, cfg, want, stopAt, func(cc *CoordinatorConfig) { cc.CheckpointEvery = 2 })
			if cp.Saves == 0 {
				t.Fatal("no checkpoint saved")
			}
		})
	}
	// Checkpoints written by time (CheckpointInterval, no round count)
	// resume bit-identically too, with the resumed steps past any the
	// stopped coordinator may have sent.
	t.Run("timed", func(t *testing.T) {
		cp := stopAndResume(ctx, t, cfg, want, 13, func(cc *CoordinatorConfig) {
			cc.CheckpointEvery, cc.CheckpointInterval = 0, time.Microsecond
		})
		if cp.Saves < 13 {
			t.Errorf("%d checkpoints saved by time, want one per round or more", cp.Saves)
		}
	})
}

// stopAndResume runs a federation of two sites of 40 and 50 rows whose
// coordinator, checkpointing as configure sets, is stopped once the
// gradients of round stopAt are in and then started again; it fails the
// test unless the resumed run ends with want's models, and returns the
// checkpoints.
func stopAndResume(ctx context.Context, t *testing.T, cfg estimator.Config, want *estimator.Model, stopAt int, configure func(*CoordinatorConfig)) *memCheckpoints {
	t.Helper()
	f := newFed(40, 50)
	sites := f.start(ctx)
	cp := &memCheckpoints{}
	cctx, stop := context.WithCancel(ctx)
	var mu sync.Mutex
	grads := 0
	f.net.Intercept = func(b []byte) [][]byte {
		e, _ := wire.Unmarshal(b)
		if e != nil && e.Kind == wire.KindGradient {
			mu.Lock()
			if grads++; grads == 2*stopAt {
				stop()
			}
			mu.Unlock()
		}
		return [][]byte{b}
	}
	cc := f.coordinator(cfg)
	cc.Checkpoints = cp
	configure(&cc)
	runUntilStopped(t, cctx, cc, f)
	res, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
	if err != nil {
		t.Fatal(err)
	}
	sameModels(t, res, want.Trained, "resumed model differs by %g")
	waitSites(t, sites)
	return cp
}

// runUntilStopped runs the coordinator cc until the test cancels cctx,
// and fails the test if it ends any other way.
func runUntilStopped(t *testing.T, cctx context.Context, cc CoordinatorConfig, f *fed) {
	t.Helper()
	if _, err := RunCoordinator(cctx, cc, f.net.Endpoint("coord")); !errors.Is(err, context.Canceled) {
		t.Fatalf("first coordinator: %v", err)
	}
}

// hookCheckpoints calls saved with every state it has stored.
type hookCheckpoints struct {
	memCheckpoints
	saved func(st *State)
}

func (h *hookCheckpoints) Save(ctx context.Context, st *State) error {
	if err := h.memCheckpoints.Save(ctx, st); err != nil {
		return err
	}
	h.saved(st)
	return nil
}

func TestCoordinatorResumesAtModelBoundary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := testConfig()
	ref := newFed(40, 50)
	want, err := estimator.Fit(ctx, ref.data, testSchema, estimator.GaussianSpectral{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for kind := 1; kind <= len(estimator.Kinds); kind++ {
		t.Run(fmt.Sprint(kind), func(t *testing.T) {
			f := newFed(40, 50)
			sites := f.start(ctx)
			cctx, stop := context.WithCancel(ctx)
			// Stop right after the save at the end of model number kind.
			cp := &hookCheckpoints{saved: func(st *State) {
				if st.Checkpoint == nil && len(st.Trained) == kind {
					stop()
				}
			}}
			cc := f.coordinator(cfg)
			cc.Checkpoints, cc.CheckpointEvery = cp, 100
			runUntilStopped(t, cctx, cc, f)
			res, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
			if err != nil {
				t.Fatal(err)
			}
			sameModels(t, res, want.Trained, "resumed model differs by %g")
			waitSites(t, sites)
		})
	}
}

// TestCoordinatorResumesInFinish stops the coordinator in the finish phase,
// after the first done sites confirmed the run and left (as sites started
// with --once do) while the others never heard the global ATE, and resumes
// it. The resumed coordinator must send nothing to the sites that left, ask
// no site for its ATE again, and end with the uninterrupted run's result.
func TestCoordinatorResumesInFinish(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := testConfig()
	sizes := []int{40, 50, 30}
	want, _ := referenceRun(ctx, t, cfg, sizes...)
	for _, done := range []int{0, 1, 2} {
		t.Run(fmt.Sprint(done), func(t *testing.T) {
			f := newFed(sizes...)
			cctx, stop := context.WithCancel(ctx)
			defer stop()
			held := func(site string) bool { return slices.Index(f.names, site) >= done }
			var mu sync.Mutex
			resumed := false
			ates, saves, resent := 0, 0, 0
			sentAfter := map[string][]wire.Kind{} // by recipient, once resumed
			f.net.Intercept = func(b []byte) [][]byte {
				e, err := wire.Unmarshal(b)
				if err != nil {
					return [][]byte{b}
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case resumed:
					if e.Sender == "coord" {
						sentAfter[e.Recipient] = append(sentAfter[e.Recipient], e.Kind)
					}
				case e.Kind == wire.KindATE:
					ates++
				case e.Kind == wire.KindGlobalATE && held(e.Recipient):
					// The held sites stay in the run, waiting for the
					// global ATE. A coordinator that sends it again
					// saved nothing when the done arrived: stop it
					// anyway, to show what its resumption does.
					if resent++; resent > len(sizes)-done {
						stop()
					}
					return nil
				}
				return [][]byte{b}
			}
			cp := &hookCheckpoints{}
			cp.saved = func(*State) {
				mu.Lock()
				defer mu.Unlock()
				// Once every ATE is in: the save of the ATEs, then one
				// per confirmed site.
				if ates == len(sizes) {
					if saves++; saves == 1+done {
						stop()
					}
				}
			}
			sites := f.start(ctx)
			cc := f.coordinator(cfg)
			cc.Checkpoints, cc.CheckpointEvery = cp, 2
			cc.RoundTimeout, cc.Retries = 2*time.Second, 2
			runUntilStopped(t, cctx, cc, f)
			for s := range done {
				r := <-sites[s] // the site has left
				if r.err != nil || r.res.Global.PlugIn.Estimate != want.GlobalATE {
					t.Fatalf("%s before the stop: %v", f.names[s], r.err)
				}
			}
			mu.Lock()
			resumed = true
			mu.Unlock()
			res, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord"))
			if err != nil {
				t.Fatalf("resumed coordinator: %v", err)
			}
			if res.GlobalATE != want.GlobalATE || res.GlobalAIPW != want.GlobalAIPW || !slices.Equal(res.LocalATE, want.LocalATE) ||
				!slices.Equal(res.LocalAIPW, want.LocalAIPW) || !slices.Equal(res.Rows, want.Rows) {
				t.Errorf("resumed result %+v, uninterrupted %+v", res, want)
			}
			sameModels(t, res, modelsOf(want), "resumed model differs by %g")
			for s := done; s < len(sizes); s++ {
				if r := <-sites[s]; r.err != nil || r.res.Global.PlugIn.Estimate != want.GlobalATE {
					t.Errorf("%s after the resumption: %v", f.names[s], r.err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, name := range f.names {
				var kinds []wire.Kind
				if held(name) {
					kinds = []wire.Kind{wire.KindGlobalATE}
				}
				if !slices.Equal(sentAfter[name], kinds) {
					t.Errorf("resumed coordinator sent %s %v, want %v", name, sentAfter[name], kinds)
				}
			}
			if st, err := cp.Load(ctx); st != nil || err != nil {
				t.Errorf("checkpoint after the run: %v, %v", st, err)
			}
		})
	}
}
