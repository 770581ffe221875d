package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/report"
	"github.com/crffd/crffd/store"
)

// Log keys of crffd report.
const (
	logKeyOut   = "out"
	logKeyBytes = "bytes"
)

func newReportCmd(a *app) *cobra.Command {
	var db, coordinator, out string
	cmd := &cobra.Command{
		Use:   "report (--db SITE_FILE | --coordinator STATE_FILE) --out report.html",
		Short: "Write an HTML report of a site file or of the coordinator's state",
		Long: `report writes one self-contained HTML page (figures embedded, nothing loaded
from the network) to --out.

With --db it reports a site file: the ATEs with their 95% intervals, the
training loss per round, the site's transfer factors, the distribution of the
CATEs, the propensity overlap of treated and control rows with a positivity
warning for propensities outside [0.01, 0.99], and a summary of crff_audit:
what the site sent and received, by kind, with bytes. The page shows
distributions of the site's rows: it is for the site's operator, is written
readable by its owner only, and is never sent anywhere.

With --coordinator it reports the coordinator's state file: the finished runs
with their global ATEs and, while a run is in progress, the full matrices of
transfer factors between the sites.

It reads one configuration key: site.busy_timeout, how long to wait for a
lock on the site file (CRFFD_SITE_BUSY_TIMEOUT=30s).`,
		Example: `  # a site file, after crffd fit or crffd site
  crffd report --db demo/site1.sqlite --out report.html

  # the coordinator's state file (coordinator.state_db of coordinator.yaml)
  crffd report --coordinator coordinator.sqlite --out federation.html`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (db == "") == (coordinator == "") {
				return errors.New("report: give exactly one of --db and --coordinator")
			}
			return runReport(cmd.Context(), a, db, coordinator, out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&db, "db", "", "site SQLite file to report")
	f.StringVar(&coordinator, "coordinator", "", "coordinator state file to report")
	f.StringVar(&out, "out", "", "HTML file to write (replaced if it exists)")
	_ = cmd.MarkFlagRequired("out")
	cmd.MarkFlagsMutuallyExclusive("db", "coordinator")
	return cmd
}

// runReport writes the report of the site file db or else of the
// coordinator's state file coordinator to out.
func runReport(ctx context.Context, a *app, db, coordinator, out string) error {
	var render func(w io.Writer) error
	if db != "" {
		timeout, err := a.conf().PositiveDuration("site.busy_timeout")
		if err != nil {
			return err
		}
		s, err := store.Open(ctx, db, store.Options{BusyTimeout: timeout, Logger: a.log, ReadOnly: true})
		if err != nil {
			return err
		}
		defer s.Close()
		render = func(w io.Writer) error { return report.Site(ctx, s, w) }
	} else {
		render = func(w io.Writer) error { return report.Coordinator(ctx, coordinator, w) }
	}
	n, err := report.WriteFile(out, render)
	if err != nil {
		return err
	}
	// stdout says where; the log adds only the size, below info.
	a.log.Debug("report written", slog.String(logKeyOut, out), slog.Int64(logKeyBytes, n))
	_, err = fmt.Fprintf(a.stdout, "report written to %s\n", out)
	return err
}
