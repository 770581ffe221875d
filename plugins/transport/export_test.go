package transport

import (
	"context"
	"log/slog"
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/crffd/crffd/plugins/transport/transportpb"
)

// NewTestClient serves impl over an in-process gRPC connection, as a
// plugin process would, and returns a client configured with cfg. The
// plugin side logs to pluginLog, the client to log (either may be nil).
func NewTestClient(t testing.TB, impl Transport, cfg Config, log *slog.Logger, pluginLog *PluginLogger) (*Client, error) {
	t.Helper()
	conn, _ := plugin.TestPluginGRPCConn(t, false, pluginSet(impl, pluginLog))
	t.Cleanup(func() { conn.Close() })
	raw, err := conn.Dispense(pluginName)
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{rpc: raw.(transportpb.TransportClient), name: "test", cfg: cfg, log: orDiscard(log)}
	if err := c.configure(context.Background()); err != nil {
		return nil, err
	}
	return c, nil
}
