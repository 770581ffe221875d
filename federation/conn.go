package federation

import (
	"context"

	"github.com/crffd/crffd/federation/wire"
)

// Conn is the message channel a role talks over: a transport plugin's
// client, or an endpoint of federationtest.MemNetwork.
type Conn interface {
	// Send hands e to the channel for delivery to e.Recipient.
	Send(ctx context.Context, e *wire.Envelope) error
	// Inbox delivers the envelopes addressed to this daemon. It is closed
	// when the channel fails or ends.
	Inbox() <-chan *wire.Envelope
}
