package site

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/crffd/crffd/daemon"
	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/pipeline"
	"github.com/crffd/crffd/store"
)

// federated is a site daemon taking part in a federation's runs.
type federated struct {
	cfg Config
	f   *Federation
	log *slog.Logger
	// recs and ids are the rows of the run at hand and the HMACs of their
	// identities: each run reads the table anew when it begins.
	recs *store.Records
	ids  []wire.Digest
	// kernels are the kernels the site may train, its own first, and
	// spectra their plugins, by pipeline.KernelLabel.
	kernels []modelstore.Kernel
	spectra map[string]estimator.Spectral
	losses  []store.Loss // the loss history of the run at hand, recorded when it is published
}

// runFederated takes part in the federation's runs: it reads and
// validates the site's records, answers the coordinator round by round,
// and publishes each run's results in the site file as crffd fit does,
// with the federation's weights and the global ATE. A run that fails or
// is refused is logged and recorded in crff_run_log, and the site waits
// for the next (with Once it returns an error of daemon.ExitRunFailed);
// only the errors of daemon.Fatal stop it.
func runFederated(ctx context.Context, cfg Config) error {
	s := &federated{cfg: cfg, f: cfg.Federation, log: cfg.Logger}
	if err := s.start(ctx); err != nil {
		return err
	}
	conn, closeConn, err := s.f.Connect(ctx)
	if err != nil {
		return daemon.WithExit(daemon.ExitTransport, err)
	}
	defer closeConn()
	if !cfg.Once {
		// Rows added between runs are scored with the current run's model,
		// as the site does without a federation; the next run trains on
		// them and rescores every row.
		scoreCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		defer func() { stop(); <-done }()
		go func() {
			defer close(done)
			// The runs' kernel plugins serve the scorer too: one process
			// each. The scorer adds to its map, so it has its own.
			scoreBetweenRuns(scoreCtx, cfg, maps.Clone(s.spectra))
		}()
	}
	for {
		if stop, err := s.runOnce(ctx, conn); stop {
			return err
		}
	}
}

// start reads the site's records, checks its privacy settings against
// them, and opens its kernels.
func (s *federated) start(ctx context.Context) error {
	p := s.f.Privacy
	if p != nil {
		p.Ledger = storeLedger{s.cfg.DB}
	}
	recs, ids, err := s.read(ctx)
	if err != nil {
		return err
	}
	s.recs, s.ids = recs, ids
	if err := privateColumns(s.log, p, s.cfg.Source, recs); err != nil {
		return daemon.WithExit(daemon.ExitConfig, err)
	}
	logPrivacy(s.log, p)
	if s.kernels, s.spectra, err = s.f.Kernels(ctx); err != nil {
		return daemon.WithExit(daemon.ExitConfig, err)
	}
	return nil
}

// runOnce takes part in one run, and reports whether the daemon stops,
// with the error it stops with.
func (s *federated) runOnce(ctx context.Context, conn federation.Conn) (bool, error) {
	s.losses = nil
	s.log.Info("site waiting for the coordinator", slog.String(logKeyName, s.f.Name), slog.String(logKeyDB, s.cfg.Source.DB),
		slog.Int(logKeyRows, s.recs.Len()))
	r, err := federation.RunSite(ctx, s.siteConfig(), conn)
	if err != nil {
		if ctx.Err() != nil {
			return true, err
		}
		if fatal := daemon.Fatal(err); fatal != nil {
			return true, fatal
		}
		if err := s.logRun(ctx, err, ""); err != nil {
			return true, err
		}
		if s.cfg.Once {
			return true, daemon.WithExit(daemon.ExitRunFailed, err)
		}
		return false, nil
	}
	if err := s.logRun(ctx, nil, r.RunID); err != nil {
		return true, err
	}
	if s.f.Ran != nil {
		if err := s.f.Ran(r); err != nil {
			return true, err
		}
	}
	return s.cfg.Once, nil
}

// siteConfig is the configuration of the site's next run.
func (s *federated) siteConfig() federation.SiteConfig {
	own := s.kernels[0]
	cfg := federation.SiteConfig{
		Name: s.f.Name, Coordinator: s.f.Coordinator,
		Data: s.recs.Data, Schema: s.recs.Schema, Columns: s.recs.Layout.Covariates, ColumnKey: s.f.Secret, Identities: s.ids,
		Spectral: s.spectra[pipeline.KernelLabel(own)], KernelName: pipeline.KernelLabel(own), Logger: s.log, Metrics: s.f.Metrics,
		MinArmRows: s.f.MinArmRows, Limits: s.f.Limits, Privacy: s.f.Privacy,
		// Each run trains on the table as it is when the run begins;
		// Join and Publish see the rows read then.
		Rows: func(ctx context.Context) (federation.SiteRows, error) {
			r, i, err := s.read(ctx)
			if err != nil {
				return federation.SiteRows{}, err
			}
			s.recs, s.ids = r, i
			return federation.SiteRows{Data: r.Data, Schema: r.Schema, Columns: r.Layout.Covariates, Identities: i}, nil
		},
		Join: joinRun(s.log, s.cfg.DB, s.f.Name, func() *store.Records { return s.recs }, s.f.MinArmRows),
		Audit: func(ctx context.Context, d federation.Direction, e *wire.Envelope) error {
			return daemon.StorageError(s.cfg.DB.AppendAudit(ctx, auditEntry(d, e)))
		},
		Loss: func(model string, round int, loss float64) {
			s.losses = append(s.losses, store.Loss{Model: model, Round: round, Loss: loss})
		},
		Publish:   s.publish,
		Subgroups: s.subgroupPolicy(),
		SubgroupRows: func(ctx context.Context, pred string) ([]bool, error) {
			return s.cfg.DB.SubgroupMembers(ctx, s.recs.Layout, pred, s.recs.IDs)
		},
	}
	if s.f.AnyKernel {
		// The site trains any of its kernels a run names.
		cfg.Kernels = installedKernels(s.spectra)
	}
	return cfg
}

// subgroupPolicy is site.subgroups, whose names the site evaluates with
// the predicates its crff_subgroup holds under them.
func (s *federated) subgroupPolicy() federation.SubgroupPolicy {
	p := s.f.Subgroups
	if len(p.Names) > 0 {
		p.Approved = s.cfg.DB.SubgroupPredicate
	}
	return p
}

// logRun logs how a run ended with err (nil: completed) and records it
// in crff_run_log: the run of a *federation.RunError, or run. A failure
// with no run (before any hello) is only logged. A run log that cannot be
// written is a storage failure.
func (s *federated) logRun(ctx context.Context, err error, run string) error {
	var re *federation.RunError
	if errors.As(err, &re) {
		run = re.RunID
	}
	end := federation.EndOf(run, err)
	if err != nil {
		s.log.Error("run ended without results; waiting for the coordinator's next run",
			slog.String(logKeyRun, run), slog.String(logKeyStatus, string(end.Status)), slog.String(logKeyError, err.Error()))
	}
	if run == "" {
		return nil
	}
	err = s.cfg.DB.LogRun(ctx, store.RunEnd{Run: run, Status: store.RunStatus(end.Status), Reason: end.Reason})
	return daemon.WithExit(daemon.ExitStorage, daemon.StorageError(err))
}

// installedKernels is a federation.SiteConfig.Kernels that opens the
// kernels of spectra (by pipeline.KernelLabel), the plugins a site open
// to any of its kernels has open.
func installedKernels(spectra map[string]estimator.Spectral) func(context.Context, string) (estimator.Spectral, error) {
	return func(_ context.Context, name string) (estimator.Spectral, error) {
		if sp, ok := spectra[name]; ok {
			return sp, nil
		}
		return nil, fmt.Errorf("no installed kernel plugin at %q (this site has %s)", name, strings.Join(slices.Sorted(maps.Keys(spectra)), ", "))
	}
}
