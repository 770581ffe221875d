package site

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/crffd/crffd/daemon"
	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/store"
)

// Run runs the site daemon of cfg until ctx ends, or for one pass with
// cfg.Once: it scores new rows, and with cfg.Federation takes part in the
// federation's runs. It returns ctx's error when ctx ends; its other
// errors carry the exit status of package daemon when they have one.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.check(); err != nil {
		return daemon.WithExit(daemon.ExitConfig, err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Federation != nil {
		return runFederated(ctx, cfg)
	}
	return runScoring(ctx, cfg)
}

// check refuses a configuration Run cannot run with.
func (cfg Config) check() error {
	switch f := cfg.Federation; {
	case cfg.DB == nil:
		return errors.New("site daemon: no site file (Config.DB)")
	case cfg.OpenKernel == nil:
		return errors.New("site daemon: no way to open a model's kernel (Config.OpenKernel)")
	case cfg.PollInterval <= 0:
		return fmt.Errorf("site daemon: poll interval %v: want a positive duration", cfg.PollInterval)
	case f != nil && (f.Kernels == nil || f.Connect == nil):
		return errors.New("site daemon: a federated site needs Federation.Kernels and Federation.Connect")
	}
	return nil
}

// runScoring polls for unscored rows until ctx ends. A transient
// failure, such as a locked file, is logged and the next poll tries
// again; any other stops the daemon.
func runScoring(ctx context.Context, cfg Config) error {
	s := &scorer{log: cfg.Logger, db: cfg.DB, open: cfg.OpenKernel}
	cfg.Logger.Info("site scoring", slog.String(logKeyDB, cfg.Source.DB), slog.Duration(logKeyInterval, cfg.PollInterval))
	tick := time.NewTicker(cfg.PollInterval)
	defer tick.Stop()
	for {
		if err := s.poll(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if cfg.Once || !errors.Is(err, ErrTransient) {
				return err
			}
			cfg.Logger.Warn("scoring poll failed; retrying", slog.String(logKeyError, err.Error()))
		}
		if cfg.Once {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// scoreBetweenRuns scores, every cfg.PollInterval until ctx ends, the
// rows added to a federated site's table since its current run. Failures
// are logged, not returned: the site keeps taking part in federation
// runs, and each run rescores every row. Before the first run, and while
// a new run replaces the current one, there is nothing to score with,
// which is not worth a warning. kernels are the kernel plugins the site
// has open already, by pipeline.KernelLabel, which the scorer uses (and
// adds to) rather than start its own.
func scoreBetweenRuns(ctx context.Context, cfg Config, kernels map[string]estimator.Spectral) {
	s := &scorer{log: cfg.Logger, db: cfg.DB, open: cfg.OpenKernel, kernels: kernels}
	tick := time.NewTicker(cfg.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		err := s.poll(ctx)
		switch {
		case err == nil || ctx.Err() != nil:
		case errors.Is(err, store.ErrNoRun) || errors.Is(err, store.ErrStaleRun) || errors.Is(err, ErrTransient):
			cfg.Logger.Debug("no new rows scored", slog.String(logKeyError, err.Error()))
		default:
			cfg.Logger.Warn("scoring new rows failed; retrying", slog.String(logKeyError, err.Error()))
		}
	}
}

// ErrTransient marks a poll failure worth retrying, such as a locked file.
var ErrTransient = errors.New("transient")
