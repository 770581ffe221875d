// Command crff-transport-grpc is the built-in grpc transport plugin of
// crffd: sites dial the coordinator over mutual TLS and hold a
// bidirectional stream (see package grpcnet). crffd launches it; it is not
// meant to be run by hand.
package main

import (
	"github.com/crffd/crffd/plugins/transport"
	"github.com/crffd/crffd/plugins/transport/grpcnet"
)

func main() {
	log := transport.NewPluginLogger(nil)
	transport.Serve(grpcnet.New(log.Logger()), log)
}
