package kernels

import (
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/crffd/crffd/plugins/host"
)

// Serve runs k as a kernel plugin and returns when the host is done with it.
// It is the whole of a plugin's main function. Nothing may be written to
// standard output before Serve, which go-plugin uses for its handshake.
func Serve(k Kernel) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         pluginSet(k),
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, host.ServerOptions()...)...)
		},
	})
}
