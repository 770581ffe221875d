package coordinatord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/store/coordstore"
)

// daemon is the state of Run between runs.
type daemon struct {
	cfg      Config
	log      *slog.Logger
	minSites int
	failures int // consecutive failed runs
}

// Run drives runs until ctx ends, or for one run with cfg.Once. It returns
// nil when ctx ends between runs.
func Run(ctx context.Context, cfg Config) error {
	sites := cfg.Run.Sites
	if len(sites) == 0 || cfg.MinSites < 0 || cfg.MinSites > len(sites) || cfg.State == nil || cfg.Conn == nil || cfg.NewRunID == nil {
		return fmt.Errorf("coordinatord: %d sites, min sites %d: want sites, min sites 0 to their number, a state file, a connection and run ids", len(sites), cfg.MinSites)
	}
	d := &daemon{cfg: cfg, log: cfg.Run.Logger, minSites: cfg.MinSites}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.minSites == 0 {
		d.minSites = len(sites)
	}
	// The sites of the next run: every listed one, or those a run that
	// went on without some of them covers.
	cover, err := ResumedSites(ctx, cfg.State, sites, d.minSites)
	if err != nil {
		return err
	}
	for {
		next, wait, err := d.runOnce(ctx, cover)
		if err != nil || next == nil {
			return err
		}
		cover = next
		if wait < 0 { // run again at once, without the sites at fault
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// never is the wait after a completed run without Config.RunEvery: until
// ctx ends.
const never = time.Duration(math.MaxInt64)

// runOnce runs once over the sites cover and returns the sites of the next
// run and how long to wait for it, negative for not at all; next is nil
// when Run returns, after the run of Config.Once.
func (d *daemon) runOnce(ctx context.Context, cover []string) (next []string, wait time.Duration, err error) {
	sites := d.cfg.Run.Sites
	cc := d.cfg.Run
	cc.RunID, cc.Sites, cc.Checkpoints = d.cfg.NewRunID(), cover, checkpoints{d.cfg.State}
	start, before := time.Now(), cc.Metrics.Snapshot()
	res, err := federation.RunCoordinator(ctx, cc, d.cfg.Conn)
	if err != nil {
		if ctx.Err() != nil || fatal(err) {
			return nil, 0, err
		}
		wait, ferr := d.failed(ctx, cc.RunID, err)
		if ferr != nil {
			return nil, 0, ferr
		}
		if rest := federation.Without(cover, federation.FaultySites(err)); len(rest) < len(cover) && len(rest) >= d.minSites {
			d.log.Warn("running again without the sites at fault", slog.Any(LogKeySites, rest),
				slog.Any(LogKeyWithout, federation.Without(sites, rest)), slog.Int(LogKeyMinSites, d.minSites))
			return rest, -1, nil
		}
		if d.cfg.Once {
			return nil, 0, mark(ErrRunFailed, err)
		}
		d.failures++
		return sites, wait, nil
	}
	d.failures = 0
	if err := d.finished(ctx, res, start, before); err != nil {
		return nil, 0, err
	}
	if d.cfg.Once {
		return nil, 0, nil
	}
	if d.cfg.RunEvery <= 0 {
		return sites, never, nil
	}
	return sites, d.cfg.RunEvery, nil
}

// finished records and logs the completed run res, which started at start
// with the metrics before, and tells Config.Finished of it.
func (d *daemon) finished(ctx context.Context, res *federation.Result, start time.Time, before federation.Snapshot) error {
	if err := d.cfg.State.Finish(ctx, res); err != nil {
		return mark(ErrStorage, err)
	}
	s := d.cfg.Run.Metrics.Snapshot()
	d.log.Info("run finished", slog.String(LogKeyRun, res.RunID), slog.Float64(LogKeyATE, res.GlobalAIPW.Estimate),
		slog.Float64(LogKeySE, res.GlobalAIPW.SE), slog.Float64(LogKeyPlugInATE, res.GlobalATE),
		slog.Int(LogKeyRounds, s.Rounds-before.Rounds), slog.Float64(LogKeyRoundSeconds, s.RoundSeconds-before.RoundSeconds),
		slog.Int64(LogKeyBytesSent, s.BytesSent-before.BytesSent), slog.Int64(LogKeyBytesReceived, s.BytesReceived-before.BytesReceived),
		slog.Float64(LogKeySeconds, time.Since(start).Seconds()))
	if d.cfg.Finished != nil {
		return d.cfg.Finished(res)
	}
	return nil
}

// failed logs and records a run that ended with err, forgets its
// checkpoint, so that the next attempt is a new run rather than a
// resumption of the failed one, and returns how long to wait before the
// next: RetryAfter doubled for each of the failures before it, up to
// maxBackoff times.
func (d *daemon) failed(ctx context.Context, run string, err error) (time.Duration, error) {
	// A resumed run has the checkpoint's id.
	var re *federation.RunError
	if errors.As(err, &re) {
		run = re.RunID
	}
	end := federation.EndOf(run, err)
	wait := d.cfg.RetryAfter * time.Duration(min(1<<min(d.failures, 30), maxBackoff))
	d.log.Error("run ended without results", slog.String(LogKeyRun, run), slog.String(LogKeyStatus, string(end.Status)),
		slog.String(LogKeyError, err.Error()), slog.Duration(LogKeyRetryIn, wait))
	if err := d.cfg.State.LogRun(ctx, end); err != nil {
		return 0, mark(ErrStorage, err)
	}
	if err := d.cfg.State.Clear(ctx); err != nil {
		return 0, mark(ErrStorage, err)
	}
	return wait, nil
}

// ResumedSites returns the sites of the daemon's first run: those of the
// checkpoint in db of a run that went on without some of sites, which it
// resumes, or else sites. A checkpoint of other sites is left for
// federation.RunCoordinator to refuse (federation.ErrCheckpointSites).
func ResumedSites(ctx context.Context, db *coordstore.DB, sites []string, minSites int) ([]string, error) {
	st, err := db.Load(ctx)
	if err != nil {
		return nil, mark(ErrStorage, err)
	}
	if st != nil && len(st.Sites) >= minSites && federation.Subsequence(st.Sites, sites) {
		return st.Sites, nil
	}
	return sites, nil
}
