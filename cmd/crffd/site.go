package main

import (
	"context"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/daemon"
	"github.com/crffd/crffd/daemon/site"
	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/pipeline"
	"github.com/crffd/crffd/plugins/transport"
	"github.com/crffd/crffd/store"
)

func newSiteCmd(a *app) *cobra.Command {
	var once bool
	cmd := &cobra.Command{
		Use:   "site --config SITE.yaml",
		Short: "Run a site's daemon: score new rows with the stored model (and take part in a federation when configured)",
		Long: `site runs a site's daemon on its SQLite file. Every poll_interval it looks for
rows of the configured table that have no CATE yet and scores them with the
stored model of the current run, without retraining, appending them to
crff_cate. Rows deleted since lose their CATE; rows whose covariates were
edited are scored again; rows rejected before are read again, and scored
once mended; and the local ATEs of crff_ate are recomputed over the rows the
table holds. Under on_invalid: refuse, new invalid rows are logged and wait,
unscored, and the daemon keeps serving. When the configuration names a federation, it also takes part in
the federation's training runs; between runs it keeps scoring new rows with
the latest run's model, and each run retrains on, and rescores, every row.

The keys it reads most: site.db, site.table and the site.*_column keys (the
records), site.poll_interval, site.on_invalid, and for a federation
federation.address, federation.tls.ca, .cert and .key, and the secret
federation.secret (best set as CRFFD_FEDERATION_SECRET). crffd config show
--config FILE prints every key with its value and where it came from.`,
		Example: `  # score rows added after crffd fit, every site.poll_interval
  crffd site --config demo/site1.yaml

  # take part in one federated run (federation.address set), then leave
  CRFFD_FEDERATION_SECRET="$(cat /etc/crffd/secret)" crffd site --config hospital-a.yaml --once

  # score rows every minute and log every step
  CRFFD_SITE_POLL_INTERVAL=1m crffd site --config hospital-a.yaml --log-level debug`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tightenGC()
			if a.conf().Federated() {
				return runFederatedSite(cmd.Context(), a, once)
			}
			return runScoringSite(cmd.Context(), a, once)
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "leave after one pass (one scoring poll, or one complete federated run)")
	return cmd
}

// runScoringSite runs the site daemon without a federation: it polls for
// unscored rows until ctx ends.
func runScoringSite(ctx context.Context, a *app, once bool) error {
	src, err := a.conf().SiteSource()
	if err != nil {
		return withExit(exitConfig, err)
	}
	every, err := a.conf().PositiveDuration("site.poll_interval")
	if err != nil {
		return withExit(exitConfig, err)
	}
	db, err := a.openSite(ctx, src)
	if err != nil {
		return withExit(exitStorage, err)
	}
	defer db.Close()
	return site.Run(ctx, site.Config{DB: db, Source: src, PollInterval: every, Once: once, OpenKernel: a.openSpectral, Logger: a.log})
}

// runFederatedSite runs the site daemon of a site that takes part in a
// federation: it reads the site's and the federation's settings, opens
// the site file, and hands the rest to package site, which opens the
// kernels and the transport through this command's plugins.
func runFederatedSite(ctx context.Context, a *app, once bool) error {
	if keys := a.conf().IgnoredModelKeys(); len(keys) > 0 {
		a.log.Warn("model settings are the coordinator's in a federation; this site's are ignored",
			slog.String("keys", strings.Join(keys, ", ")))
	}
	src, err := a.conf().SiteSource()
	if err != nil {
		return withExit(exitConfig, err)
	}
	cfg, err := a.federatedSite(src)
	if err != nil {
		return withExit(exitConfig, err)
	}
	db, err := a.openSite(ctx, src)
	if err != nil {
		return withExit(exitStorage, err)
	}
	defer db.Close()
	cfg.DB, cfg.Once = db, once
	return site.Run(ctx, cfg)
}

// federatedSite returns the configuration of a federated site daemon,
// without its file: the site's records src, and the federation.*,
// limits.*, privacy.* and kernel.name settings, with the hooks through
// which the site opens its kernels and its transport and reports each
// run.
func (a *app) federatedSite(src store.Source) (site.Config, error) {
	c, err := a.conf().FederatedSite(src, a.log)
	if err != nil {
		return c, err
	}
	metrics, name := &federation.Metrics{}, c.Federation.Name
	c.OpenKernel, c.Logger = a.openSpectral, a.log
	c.Federation.Metrics, c.Federation.Kernels = metrics, a.siteKernels
	c.Federation.Connect = func(ctx context.Context) (federation.Conn, func(), error) { return a.connectSite(ctx, name, metrics) }
	c.Federation.Ran = func(r *federation.SiteResult) error { return r.WriteText(a.stdout) }
	return c, nil
}

// siteKernels returns the kernels kernel.name asks a federated site to
// train, with their plugins open, by pipeline.KernelLabel.
func (a *app) siteKernels(ctx context.Context) ([]modelstore.Kernel, map[string]estimator.Spectral, error) {
	ks, err := a.kernelSettings(ctx)
	if err != nil {
		return nil, nil, err
	}
	spectra, err := pipeline.OpenKernels(ctx, ks, a.openSpectral)
	return ks, spectra, err
}

// connectSite opens the transport of site name, and serves /healthz and
// /metrics when configured.
func (a *app) connectSite(ctx context.Context, name string, m *federation.Metrics) (federation.Conn, func(), error) {
	client, err := a.openTransport(ctx, transport.RoleSite, name)
	if err != nil {
		return nil, nil, err
	}
	if err := a.serveMetrics(ctx, "site", m); err != nil {
		client.Close()
		return nil, nil, withExit(exitConfig, err)
	}
	return daemon.Conn(ctx, client), func() { client.Close() }, nil
}
