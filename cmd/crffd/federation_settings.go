package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cast"

	"github.com/crffd/crffd/certs"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/plugins/transport"
)

// federationSettings are the keys of the coordinator and of a site's
// federation section.
var federationSettings = []setting{
	{"federation.coordinator", "coordinator", "the coordinator's federation name (the common name of its certificate)"},
	{"federation.address", "", "the coordinator's host:port: where the coordinator listens (port 0 picks one) and where sites dial; a site with an address or transport options takes part in a federation"},
	{"federation.transport", "grpc", "transport plugin: crff-transport-<name> in plugin_dir (grpc: mutual TLS; spool: files in a shared directory, each signed with the sender's certificate key)"},
	{"federation.transport_options", map[string]string{}, "the transport's options, e.g. dir: SPOOL_DIR for spool (and unsigned: \"true\" to run it without certificates, trusting the folder's permissions alone), capture: FILE to record every envelope carried (paths are relative to the configuration file)"},
	{"federation.tls.ca", "", "the federation CA certificate (ca.crt, from crffd certs init)"},
	{"federation.tls.cert", "", "this daemon's certificate (NAME.crt, from crffd certs issue NAME)"},
	{"federation.tls.key", "", "this daemon's private key (NAME.key)"},
	{"federation.tls.crl", "", "the federation's revocation list (ca.crl, from crffd certs revoke), followed while the daemon runs; empty: ca.crl beside federation.tls.ca, if it is there"},
	{"federation.secret", "", "sites only: the secret shared by the sites and never by the coordinator (better set as CRFFD_FEDERATION_SECRET). It keys the column fingerprints (HMAC-SHA256; without it they are unkeyed SHA-256, which a dictionary of names reverses) and, with site.identity_columns, the de-duplication HMACs; every site needs the same; at least 128 bits, e.g. openssl rand -hex 32, or the site refuses to start"},
	{"federation.round_timeout", "2m", "coordinator: how long to wait for a site's answer before sending the step again"},
	{"federation.retries", 3, "coordinator: how often a silent site is asked again before the run stops with an error naming it"},
	{"federation.min_arm_rows", federation.DefaultMinArmRows, "sites only: the fewest rows each treatment arm must have, before and after de-duplication, for the site to take part, and the fewest rows by which a run's rows may differ from those of any earlier run the site took part in (added, deleted or edited; no difference is allowed too); below either the site sends nothing computed from its rows and stops with an error"},
	{"federation.metrics_address", "", "host:port serving /healthz and Prometheus /metrics, without authentication: loopback only (an empty host means 127.0.0.1) unless federation.metrics_public; empty for none"},
	{"federation.metrics_public", false, "allow federation.metrics_address on an interface other than loopback (an empty host then means every interface); /metrics and /healthz have no authentication, so put them behind a firewall or proxy"},
	{"coordinator.sites", []string{}, "the sites' federation names, in priority order: de-duplication keeps the copy of the site listed first"},
	{"coordinator.state_db", "coordinator.sqlite", "the coordinator's own SQLite file: checkpoints and finished runs"},
	{"coordinator.checkpoint_every", 0, "also checkpoint the training state every N rounds (0: by time only; with both 0, every round)"},
	{"coordinator.checkpoint_interval", "10s", "checkpoint the training state when this long has passed since the last checkpoint, and after every model; a restarted coordinator repeats the rounds since"},
	{"coordinator.run_every", "0s", "without --once: start a new run this often; 0 runs once, then serves health and metrics until stopped"},
	{"coordinator.min_sites", 0, "the fewest sites a run may cover: when sites refuse a run, are refused or fall silent, the coordinator runs again at once without them while at least this many remain; 0 means every listed site"},
	{"coordinator.retry_after", "1m", "without --once: after a failed or refused run, start the next this much later, doubling after each further failure up to 32 times as long"},
}

// federated reports whether the configuration makes this site part of a
// federation.
func federated(a *app) bool {
	return a.v.GetString("federation.address") != "" || len(a.transportOptions()) > 0
}

// transportOptions returns federation.transport_options from the file,
// with CRFFD_FEDERATION_TRANSPORT_OPTIONS_<NAME> variables adding or
// replacing entries.
func (a *app) transportOptions() map[string]string {
	return a.stringMap("federation.transport_options")
}

// transportConfig returns the transport configuration of this daemon.
func (a *app) transportConfig(role transport.Role, name string) transport.Config {
	opts := map[string]string{}
	for k, v := range a.transportOptions() {
		if k == "dir" || k == transport.OptionCapture {
			v = a.resolve(v)
		}
		opts[k] = v
	}
	ca := a.resolve(a.v.GetString("federation.tls.ca"))
	crl := a.resolve(a.v.GetString("federation.tls.crl"))
	if crl == "" && ca != "" {
		crl = filepath.Join(filepath.Dir(ca), certs.CRLFile)
	}
	return transport.Config{
		Name:            name,
		Role:            role,
		Coordinator:     a.v.GetString("federation.address"),
		CoordinatorName: a.v.GetString("federation.coordinator"),
		TLS: certs.Files{
			CA:   ca,
			Cert: a.resolve(a.v.GetString("federation.tls.cert")),
			Key:  a.resolve(a.v.GetString("federation.tls.key")),
			CRL:  crl,
		},
		Options: opts,
	}
}

// openTransport launches and configures the transport plugin. It is killed
// when the command ends.
func (a *app) openTransport(ctx context.Context, role transport.Role, name string) (*transport.Client, error) {
	dir, err := a.pluginDir()
	if err != nil {
		return nil, err
	}
	// A list named on purpose and not found would leave every revoked
	// certificate valid without a word.
	if crl := a.v.GetString("federation.tls.crl"); crl != "" {
		if _, err := os.Stat(a.resolve(crl)); err != nil {
			return nil, fmt.Errorf("federation.tls.crl: %w", err)
		}
	}
	tname := a.v.GetString("federation.transport")
	return transport.Open(ctx, transport.Options{
		Dir:    dir,
		Name:   tname,
		Pin:    a.pin(transport.Kind, tname),
		Logger: a.log,
		Config: a.transportConfig(role, name),
	})
}

// clientConn adapts a transport client to federation.Conn.
type clientConn struct {
	c  *transport.Client
	in *transport.Inbox
}

func (c clientConn) Send(ctx context.Context, e *wire.Envelope) error { return c.c.Send(ctx, e) }
func (c clientConn) Inbox() <-chan *wire.Envelope                     { return c.in.C() }

// health is what /healthz reports.
type health struct {
	role  string
	start time.Time
}

// metricsAddress returns where /healthz and /metrics listen for the
// configured address. They have no authentication, so without public an
// address with no host listens on 127.0.0.1 and any host other than a
// loopback address or "localhost" is refused.
func metricsAddress(addr string, public bool) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("federation.metrics_address %q: %w", addr, err)
	}
	if public {
		return addr, nil
	}
	if host == "" {
		return net.JoinHostPort("127.0.0.1", port), nil
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		return addr, nil
	}
	return "", fmt.Errorf("federation.metrics_address %q: /healthz and /metrics have no authentication, so they listen on loopback only (127.0.0.1, ::1 or localhost); set federation.metrics_public: true to serve them on %s", addr, host)
}

// serveMetrics serves /healthz and /metrics on federation.metrics_address
// until ctx ends; it does nothing when the address is empty.
func (a *app) serveMetrics(ctx context.Context, role string, m *federation.Metrics) error {
	addr := a.v.GetString("federation.metrics_address")
	if addr == "" {
		return nil
	}
	public, err := cast.ToBoolE(a.v.Get("federation.metrics_public"))
	if err != nil {
		return fmt.Errorf("federation.metrics_public %q: want true or false", a.v.GetString("federation.metrics_public"))
	}
	if addr, err = metricsAddress(addr, public); err != nil {
		return err
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("federation.metrics_address: %w", err)
	}
	h := health{role: role, start: time.Now()}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"status\":\"ok\",\"role\":%q,\"uptime_seconds\":%.0f}\n", h.role, time.Since(h.start).Seconds())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Warn("metrics server stopped", slog.String(logKeyError, err.Error()))
		}
	}()
	a.log.Info("serving health and metrics", slog.String(logKeyAddress, lis.Addr().String()))
	return nil
}
