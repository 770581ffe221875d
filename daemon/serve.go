package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/plugins/transport"
)

// ServeHealth serves GET /healthz, reporting role and uptime, and GET
// /metrics from metrics on addr until ctx ends. addr is listened on as
// given (config.Reader.Metrics checks it); a failure to listen is
// returned, one while serving is logged on log.
func ServeHealth(ctx context.Context, addr, role string, metrics http.Handler, log *slog.Logger) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("federation.metrics_address: %w", err)
	}
	start := time.Now()
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"status\":\"ok\",\"role\":%q,\"uptime_seconds\":%.0f}\n", role, time.Since(start).Seconds())
	})
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
