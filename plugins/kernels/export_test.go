package kernels

import (
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/crffd/crffd/plugins/kernels/kernelpb"
)

// NewTestClient serves k over an in-process gRPC connection, as a plugin
// process would, and returns a client bound to p.
func NewTestClient(t testing.TB, k Kernel, p Params) *Client {
	t.Helper()
	conn, _ := plugin.TestPluginGRPCConn(t, false, pluginSet(k))
	t.Cleanup(func() { conn.Close() })
	raw, err := conn.Dispense(pluginName)
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{rpc: raw.(kernelpb.KernelClient), info: k.Info()}
	if c.params, err = c.info.Resolve(p); err != nil {
		t.Fatal(err)
	}
	return c
}
