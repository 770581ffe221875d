package transport

import (
	"io"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/crffd/crffd/plugins/host"
)

// Serve runs t as a transport plugin and returns when the host is done
// with it; if t is an io.Closer it is then closed. log is the plugin's
// logger (the one t logs to), whose level follows OptionLogLevel; nil
// writes to standard error. Serve is the whole of a plugin's main function.
// Nothing may be written to standard output before Serve, which go-plugin
// uses for its handshake.
func Serve(t Transport, log *PluginLogger) {
	if log == nil {
		log = NewPluginLogger(nil)
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         pluginSet(t, log),
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, host.ServerOptions()...)...)
		},
	})
	if c, ok := t.(io.Closer); ok {
		c.Close()
	}
}
