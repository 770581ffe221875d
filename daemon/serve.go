package daemon

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/plugins/transport"
)

// Health configures what ServeHealth reports.
type Health struct {
	Role string // "site" or "coordinator"
	// CertFile is the daemon's certificate (federation.tls.cert), read at
	// every scrape and health check, so that a renewed one counts at
	// once; "" for none (the spool transport without TLS).
	CertFile string
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// CertExpiryNotReady is how close to its certificate's expiry a daemon
// says it is not ready: time to renew (crffd certs renew) before sites
// are refused.
const CertExpiryNotReady = 7 * 24 * time.Hour

// ServeHealth serves GET /healthz and GET /metrics from metrics on addr
// until ctx ends. /healthz reports the role, the uptime and whether the
// daemon is ready: it answers 503 Service Unavailable, with the reasons,
// while its certificate expires within CertExpiryNotReady (or cannot be
// read). metrics gains crffd_certificate_days_left. addr is listened on
// as given (config.Reader.Metrics checks it); a failure to listen is
// returned, one while serving is logged on log.
func ServeHealth(ctx context.Context, addr string, h Health, metrics *federation.Metrics, log *slog.Logger) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("federation.metrics_address: %w", err)
	}
	mux := newHealthMux(h, metrics)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server stopped", slog.String("error", err.Error()))
		}
	}()
	log.Info("serving health and metrics", slog.String("address", lis.Addr().String()))
	return nil
}

// newHealthMux is ServeHealth's handler.
func newHealthMux(h Health, metrics *federation.Metrics) *http.ServeMux {
	if h.Now == nil {
		h.Now = time.Now
	}
	start := h.Now()
	if h.CertFile != "" {
		metrics.Add(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "crffd_certificate_days_left",
			Help: "Days until this daemon's certificate expires (negative once it has; NaN when it cannot be read)."},
			func() float64 {
				left, err := certLeft(h.CertFile, h.Now())
				if err != nil {
					return math.NaN()
				}
				return left.Hours() / 24
			}))
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		now := h.Now()
		var reasons []string
		if h.CertFile != "" {
			left, err := certLeft(h.CertFile, now)
			switch {
			case err != nil:
				reasons = append(reasons, "certificate: "+err.Error())
			case left < CertExpiryNotReady:
				reasons = append(reasons, fmt.Sprintf("certificate expires in %.1f days (crffd certs renew)", left.Hours()/24))
			}
		}
		status, code := "ok", http.StatusOK
		if len(reasons) > 0 {
			status, code = "not ready", http.StatusServiceUnavailable
		}
		body, _ := json.Marshal(struct {
			Status  string   `json:"status"`
			Role    string   `json:"role"`
			Uptime  float64  `json:"uptime_seconds"`
			Reasons []string `json:"reasons,omitempty"`
		}{status, h.Role, math.Round(now.Sub(start).Seconds()), reasons})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		w.Write(append(body, '\n'))
	})
	return mux
}

// certLeft returns how long the certificate in file is valid from now.
func certLeft(file string, now time.Time) (time.Duration, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return 0, fmt.Errorf("%s holds no PEM certificate", file)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	return c.NotAfter.Sub(now), nil
}

// Conn adapts a transport client to federation.Conn, receiving until ctx
// ends.
func Conn(ctx context.Context, c *transport.Client) federation.Conn {
	return clientConn{c: c, in: c.Receive(ctx)}
}

// clientConn is Conn's federation.Conn.
type clientConn struct {
	c  *transport.Client
	in *transport.Inbox
}

func (c clientConn) Send(ctx context.Context, e *wire.Envelope) error { return c.c.Send(ctx, e) }
func (c clientConn) Inbox() <-chan *wire.Envelope                     { return c.in.C() }
