// Command crff-transport-spool is the built-in spool transport plugin of
// crffd: envelopes are files in a shared directory (see package spool).
// crffd launches it; it is not meant to be run by hand.
package main

import (
	"github.com/crffd/crffd/plugins/transport"
	"github.com/crffd/crffd/plugins/transport/spool"
)

func main() {
	log := transport.NewPluginLogger(nil)
	transport.Serve(spool.New(log.Logger()), log)
}
