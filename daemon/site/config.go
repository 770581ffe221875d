package site

import (
	"context"
	"log/slog"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/store"
)

// Config configures a site daemon.
type Config struct {
	// DB is the site file, open; Run does not close it.
	DB *store.Site
	// Source names the site's records in DB.
	Source store.Source
	// PollInterval is how often the daemon looks for new rows to score.
	PollInterval time.Duration
	// Once makes Run return after one pass: one scoring poll, or one
	// complete federated run.
	Once bool
	// OpenKernel opens the kernel plugin of a stored model. The daemon
	// opens each kernel once and keeps it for its life, so that reloading
	// the model after every run does not start one more plugin process
	// each time.
	OpenKernel modelstore.SpectralFunc
	Logger     *slog.Logger
	// Federation, when not nil, makes the site take part in a
	// federation's runs.
	Federation *Federation
}

// Federation configures a site's part in a federation.
type Federation struct {
	Name        string // the site's federation name
	Coordinator string // the coordinator's federation name
	// Secret is the secret the sites share and the coordinator does not:
	// it keys the column fingerprints and the HMACs of the rows' identity
	// columns (Source.IdentityColumns), which need it. Empty: none.
	Secret     []byte
	MinArmRows int // federation.SiteConfig.MinArmRows
	Limits     federation.Limits
	// Subgroups is the site's policy on the coordinator's subgroups
	// (site.subgroups), which it evaluates on its own table.
	Subgroups federation.SubgroupPolicy
	// PolicyThresholds are the τ̂ thresholds T of the rules cate_above_T
	// the site's crff_policy evaluates (site.policy_thresholds).
	PolicyThresholds []float64
	// Privacy, when not nil, makes the site's answers differentially
	// private. Run sets its ledger, the site file's crff_privacy, and its
	// outcome's bound, the entry of Bounds for the outcome column; a
	// continuous column without a bound stops the site before any run.
	Privacy *federation.SitePrivacy
	// Kernels returns the kernels the site may train, its own first, and
	// their open plugins by pipeline.KernelLabel. An error is a
	// configuration error (daemon.ExitConfig) unless it has an exit
	// status already.
	Kernels func(ctx context.Context) ([]modelstore.Kernel, map[string]estimator.Spectral, error)
	// AnyKernel lets a run name any kernel Kernels returns as a further
	// kernel to choose among; otherwise the site trains its own alone.
	AnyKernel bool
	// Connect opens the site's connection to the coordinator, and returns
	// the function that closes it. An error is a transport failure
	// (daemon.ExitTransport) unless it has an exit status already.
	Connect func(ctx context.Context) (federation.Conn, func(), error)
	// Metrics, when not nil, counts the site's rounds and traffic.
	Metrics *federation.Metrics
	// Ran, when not nil, is told of each run the site completed, after it
	// is published and recorded; an error stops the site.
	Ran func(r *federation.SiteResult) error
}
