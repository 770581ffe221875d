package main

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

// openTransport launches and configures the transport plugin. It is killed
// when the command ends.
func (a *app) openTransport(ctx context.Context, role transport.Role, name string) (*transport.Client, error) {
	dir, err := a.pluginDir()
	if err != nil {
		return nil, err
	}
	if err := a.conf().CheckCRL(); err != nil {
		return nil, err
	}
	tname := a.v.GetString("federation.transport")
	return transport.Open(ctx, transport.Options{
		Dir:    dir,
		Name:   tname,
		Pin:    a.conf().Pin(transport.Kind, tname),
		Logger: a.log,
		Config: a.conf().Transport(role, name),
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

// serveMetrics serves /healthz and /metrics on federation.metrics_address
// until ctx ends; it does nothing when the address is empty.
func (a *app) serveMetrics(ctx context.Context, role string, m *federation.Metrics) error {
	addr, err := a.conf().Metrics()
	if err != nil || addr == "" {
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
