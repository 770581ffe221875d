package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/plugins/transport"
	"github.com/crffd/crffd/store/coordstore"
)

func newCoordinatorCmd(a *app) *cobra.Command {
	var once bool
	cmd := &cobra.Command{
		Use:   "coordinator --config COORDINATOR.yaml",
		Short: "Run the coordinator's daemon: drive the federation's training rounds",
		Long: `coordinator listens on federation.address for the sites of coordinator.sites
and drives training runs: hello (schemas, row counts, moments, kernel
fingerprints), de-duplication, the three models round by round, the final
weights, and the global ATE. Only parameter and gradient tables cross the wire.
It checkpoints into coordinator.state_db and, restarted after a crash,
resumes the interrupted run. A run that fails or is refused is logged and
recorded (crff_coordinator_run_log), and the next starts after
coordinator.retry_after, doubling after each further failure; with
coordinator.min_sites, a run that sites refused, were refused in or fell
silent in is run again at once without them while that many remain. With --once it
leaves after one run: exit status 0 on success, 5 when the run failed or was
refused. It stops for a configuration error (2), a transport or certificate
failure (3) or a state file it cannot write (4).

The keys it reads most: federation.address, federation.tls.ca, .cert and
.key, coordinator.sites, coordinator.state_db, coordinator.run_every,
coordinator.min_sites, and the model.* and kernel.* keys, which decide for
the whole federation. crffd config show --config coordinator.yaml prints
every key with its value and where it came from.`,
		Example: `  crffd coordinator --config coordinator.yaml

  # one run, then leave: exit status 0 when it completed, 5 when it failed or was refused
  crffd coordinator --config coordinator.yaml --once

  # every envelope in the log, as JSON
  crffd coordinator --config coordinator.yaml --log-level debug --log-format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCoordinatorDaemon(cmd.Context(), a, once) },
	}
	cmd.Flags().BoolVar(&once, "once", false, "leave after one complete run")
	return cmd
}

// maxBackoff bounds the doubling of coordinator.retry_after.
const maxBackoff = 32

// runFailed logs and records a run of the coordinator that ended with err,
// forgets its checkpoint, so that the next attempt is a new run rather than
// a resumption of the failed one, and returns how long to wait before the
// next: retryAfter doubled for each of the failures before it, up to
// maxBackoff times.
func (a *app) runFailed(ctx context.Context, db *coordstore.DB, run string, err error, retryAfter time.Duration, failures int) (time.Duration, error) {
	// A resumed run has the checkpoint's id.
	var re *federation.RunError
	if errors.As(err, &re) {
		run = re.RunID
	}
	end := federation.EndOf(run, err)
	wait := retryAfter * time.Duration(min(1<<min(failures, 30), maxBackoff))
	a.log.Error("run ended without results", slog.String(logKeyRun, run), slog.String(logKeyStatus, string(end.Status)),
		slog.String(logKeyError, err.Error()), slog.Duration(logKeyRetryIn, wait))
	if err := db.LogRun(ctx, end); err != nil {
		return 0, withExit(exitStorage, err)
	}
	if err := db.Clear(ctx); err != nil {
		return 0, withExit(exitStorage, err)
	}
	return wait, nil
}

// resumedSites returns the sites of the coordinator's first run: those of
// the checkpoint of a run that went on without some of the listed sites,
// which it resumes, or else every listed site. A checkpoint of other sites
// is left for RunCoordinator to refuse (federation.ErrCheckpointSites).
func resumedSites(ctx context.Context, db *coordstore.DB, sites []string, minSites int) ([]string, error) {
	st, err := db.Load(ctx)
	if err != nil {
		return nil, withExit(exitStorage, err)
	}
	if st != nil && len(st.Sites) >= minSites && federation.Subsequence(st.Sites, sites) {
		return st.Sites, nil
	}
	return sites, nil
}

// storageCheckpoints is a Checkpointer whose errors are storage failures,
// which stop the coordinator (exitStorage) instead of failing a run.
type storageCheckpoints struct{ db *coordstore.DB }

func (s storageCheckpoints) Save(ctx context.Context, st *federation.State) error {
	return storageError(s.db.Save(ctx, st))
}

func (s storageCheckpoints) Load(ctx context.Context) (*federation.State, error) {
	st, err := s.db.Load(ctx)
	return st, storageError(err)
}

func (s storageCheckpoints) Clear(ctx context.Context) error { return storageError(s.db.Clear(ctx)) }

// runCoordinatorDaemon runs the coordinator until ctx ends, or for one run.
func runCoordinatorDaemon(ctx context.Context, a *app, once bool) error {
	name := a.v.GetString("federation.coordinator")
	sites := a.stringList("coordinator.sites")
	if len(sites) == 0 {
		return withExit(exitConfig, errors.New("coordinator.sites is empty: list the sites' federation names"))
	}
	if err := federation.CheckSites(sites); err != nil {
		return withExit(exitConfig, fmt.Errorf("coordinator.sites: %w", err))
	}
	cfg, err := a.modelConfig()
	if err != nil {
		return withExit(exitConfig, err)
	}
	timeout, err := a.durationSetting("federation.round_timeout")
	if err != nil {
		return withExit(exitConfig, err)
	}
	retryAfter, err := a.durationSetting("coordinator.retry_after")
	if err != nil {
		return withExit(exitConfig, err)
	}
	retries := a.v.GetInt("federation.retries")
	every := a.v.GetInt("coordinator.checkpoint_every")
	if retries < 0 || every < 0 {
		return withExit(exitConfig, fmt.Errorf("federation.retries %d, coordinator.checkpoint_every %d: want ≥ 0 and ≥ 0", retries, every))
	}
	minSites := a.v.GetInt("coordinator.min_sites")
	if minSites < 0 || minSites > len(sites) {
		return withExit(exitConfig, fmt.Errorf("coordinator.min_sites %d: want 0 (every site) to the %d sites listed", minSites, len(sites)))
	}
	if minSites == 0 {
		minSites = len(sites)
	}
	checkpointInterval, err := a.duration("coordinator.checkpoint_interval")
	if err != nil {
		return withExit(exitConfig, err)
	}
	runEvery, err := a.duration("coordinator.run_every")
	if err != nil {
		return withExit(exitConfig, err)
	}
	choice, err := a.choiceSettings(ctx)
	if err != nil {
		return withExit(exitConfig, err)
	}
	sel, err := federatedSelection(choice)
	if err != nil {
		return withExit(exitConfig, err)
	}
	spectra, err := a.openKernels(ctx, choice.kernels)
	if err != nil {
		return withExit(exitConfig, err)
	}
	spectral, extra := spectra[kernelLabel(choice.kernels[0])], selectionKernels(choice.kernels[1:], spectra)
	statePath := a.resolve(a.v.GetString("coordinator.state_db"))
	db, err := coordstore.Open(ctx, statePath, 5*time.Second)
	if err != nil {
		return withExit(exitStorage, err)
	}
	defer db.Close()
	client, err := a.openTransport(ctx, transport.RoleCoordinator, name)
	if err != nil {
		return withExit(exitTransport, err)
	}
	defer client.Close()
	a.log.Info("coordinator listening", slog.String(logKeyName, name), slog.String(logKeyAddress, client.Address()), slog.Any(logKeySites, sites))
	metrics := &federation.Metrics{}
	if err := a.serveMetrics(ctx, "coordinator", metrics); err != nil {
		return withExit(exitConfig, err)
	}
	conn := clientConn{c: client, in: client.Receive(ctx)}
	failures := 0 // consecutive failed runs
	// The sites of the next run: every listed one, or those a run that
	// went on without some of them covers.
	cover, err := resumedSites(ctx, db, sites, minSites)
	if err != nil {
		return err
	}
	for {
		cc := federation.CoordinatorConfig{
			Name: name, RunID: newRunID(), Sites: cover, Config: cfg, Spectral: spectral, KernelName: kernelLabel(choice.kernels[0]), Selection: sel, Extra: extra,
			RoundTimeout: timeout, Retries: retries, Checkpoints: storageCheckpoints{db}, CheckpointEvery: every, CheckpointInterval: checkpointInterval,
			Logger: a.log, Metrics: metrics,
		}
		start, before := time.Now(), metrics.Snapshot()
		res, err := federation.RunCoordinator(ctx, cc, conn)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			if fatal := fatalRunError(err); fatal != nil {
				return fatal
			}
			wait, ferr := a.runFailed(ctx, db, cc.RunID, err, retryAfter, failures)
			if ferr != nil {
				return ferr
			}
			if rest := federation.Without(cover, federation.FaultySites(err)); len(rest) < len(cover) && len(rest) >= minSites {
				a.log.Warn("running again without the sites at fault", slog.Any(logKeySites, rest),
					slog.Any(logKeyWithout, federation.Without(sites, rest)), slog.Int(logKeyMinSites, minSites))
				cover = rest
				continue
			}
			cover = sites
			if once {
				return withExit(exitRunFailed, err)
			}
			failures++
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
			continue
		}
		failures, cover = 0, sites
		if err := db.Finish(ctx, res); err != nil {
			return withExit(exitStorage, err)
		}
		s := metrics.Snapshot()
		a.log.Info("run finished", slog.String(logKeyRun, res.RunID), slog.Float64(logKeyATE, res.GlobalAIPW.Estimate),
			slog.Float64(logKeySE, res.GlobalAIPW.SE), slog.Float64(logKeyPlugInATE, res.GlobalATE),
			slog.Int(logKeyRounds, s.Rounds-before.Rounds), slog.Float64(logKeyRoundSeconds, s.RoundSeconds-before.RoundSeconds),
			slog.Int64(logKeyBytesSent, s.BytesSent-before.BytesSent), slog.Int64(logKeyBytesReceived, s.BytesReceived-before.BytesReceived),
			slog.Float64(logKeySeconds, time.Since(start).Seconds()))
		total := 0
		for _, n := range res.Rows {
			total += n
		}
		g := res.GlobalAIPW
		if _, err := fmt.Fprintf(a.stdout, "run %s: %d sites, %d rows; global ATE %.4f, 95%% interval [%.4f, %.4f] (AIPW, se %.4f); plug-in %.4f\n",
			res.RunID, len(res.Sites), total, g.Estimate, g.Lower, g.Upper, g.SE, res.GlobalATE); err != nil {
			return err
		}
		if st := res.Selection; st != nil {
			if err := printSelection(a.stdout, st.Candidates, st.Chosen, st.Held, sel.Z, st.Shifts(len(res.Sites))); err != nil {
				return err
			}
		}
		if once {
			return nil
		}
		if runEvery <= 0 {
			<-ctx.Done()
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(runEvery):
		}
	}
}
