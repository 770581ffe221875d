package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/config"
	"github.com/crffd/crffd/coordinatord"
	"github.com/crffd/crffd/daemon"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/pipeline"
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

// runCoordinatorDaemon runs the coordinator until ctx ends, or for one run.
func runCoordinatorDaemon(ctx context.Context, a *app, once bool) error {
	cfg, err := a.coordinatorConfig(ctx, once)
	if err != nil {
		return withExit(exitConfig, err)
	}
	name, sites := cfg.Run.Name, cfg.Run.Sites
	db, err := coordstore.Open(ctx, a.conf().Resolve(a.v.GetString("coordinator.state_db")), 5*time.Second)
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
	if err := a.serveMetrics(ctx, "coordinator", cfg.Run.Metrics); err != nil {
		return withExit(exitConfig, err)
	}
	cfg.State, cfg.Conn, cfg.NewRunID = db, daemon.Conn(ctx, client), pipeline.NewRunID
	cfg.Finished = func(res *federation.Result) error { return res.WriteText(a.stdout, cfg.Run.Selection.Z) }
	return coordinatorExit(coordinatord.Run(ctx, cfg))
}

// coordinatorConfig reads the coordinator's daemon configuration, and
// opens its kernels, which end with ctx.
func (a *app) coordinatorConfig(ctx context.Context, once bool) (coordinatord.Config, error) {
	c, err := a.conf().Coordinator(once)
	if err != nil {
		return c, err
	}
	c.Run.Logger, c.Run.Metrics = a.log, &federation.Metrics{}
	return c, a.coordinatorKernels(ctx, &c.Run)
}

// coordinatorKernels sets the kernels and model selection of r from
// kernel.* and model.*.
func (a *app) coordinatorKernels(ctx context.Context, r *federation.CoordinatorConfig) error {
	choice, err := a.choiceSettings(ctx)
	if err != nil {
		return err
	}
	if r.Selection, err = config.FederatedSelection(choice); err != nil {
		return err
	}
	spectra, err := pipeline.OpenKernels(ctx, choice.Kernels, a.openSpectral)
	if err != nil {
		return err
	}
	r.KernelName = pipeline.KernelLabel(choice.Kernels[0])
	r.Spectral, r.Extra = spectra[r.KernelName], pipeline.Candidates(choice.Kernels[1:], spectra)
	return nil
}

// coordinatorExit gives the error with which the coordinator's daemon
// stopped its exit status.
func coordinatorExit(err error) error {
	switch {
	case errors.Is(err, coordinatord.ErrStorage):
		return withExit(exitStorage, err)
	case errors.Is(err, federation.ErrTransportClosed):
		return withExit(exitTransport, err)
	case errors.Is(err, federation.ErrCheckpointSites) || errors.Is(err, federation.ErrCheckpointKernels) || errors.Is(err, federation.ErrCheckpointSubgroups):
		return withExit(exitConfig, err)
	case errors.Is(err, coordinatord.ErrRunFailed):
		return withExit(exitRunFailed, err)
	}
	return err
}
