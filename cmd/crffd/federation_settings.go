package main

import (
	"context"

	"github.com/crffd/crffd/daemon"
	"github.com/crffd/crffd/federation"
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

// serveMetrics serves /healthz and /metrics on federation.metrics_address
// until ctx ends; it does nothing when the address is empty.
func (a *app) serveMetrics(ctx context.Context, role string, m *federation.Metrics) error {
	addr, err := a.conf().Metrics()
	if err != nil || addr == "" {
		return err
	}
	return daemon.ServeHealth(ctx, addr, daemon.Health{Role: role, CertFile: a.conf().Resolve(a.v.GetString("federation.tls.cert"))}, m, a.log)
}
