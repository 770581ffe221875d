// Package memnet is an in-memory network of federation endpoints, shared by
// package federationtest and federation's own tests, which cannot import
// federationtest. It needs nothing of federation but the wire format, and
// its Conn has the methods of federation.Conn.
package memnet

import (
	"context"
	"fmt"
	"sync"

	"github.com/crffd/crffd/federation/wire"
)

// Network is an in-memory network of Conns. Every envelope is encoded and
// decoded on its way, as over a real transport. Its zero value is not
// ready: use New.
type Network struct {
	mu    sync.Mutex
	boxes map[string]chan *wire.Envelope
	// Intercept, when set before use, sees every encoded envelope and
	// returns the encodings to deliver instead (none to drop it, two to
	// duplicate it).
	Intercept func(b []byte) [][]byte
}

// New returns an empty network.
func New() *Network { return &Network{boxes: map[string]chan *wire.Envelope{}} }

// box returns the inbox of name, creating it on first use with room for
// more envelopes than a run keeps in flight, so that Send never blocks.
func (n *Network) box(name string) chan *wire.Envelope {
	n.mu.Lock()
	defer n.mu.Unlock()
	b, ok := n.boxes[name]
	if !ok {
		b = make(chan *wire.Envelope, 4096)
		n.boxes[name] = b
	}
	return b
}

// Endpoint returns the Conn of the daemon named name.
func (n *Network) Endpoint(name string) Conn { return Conn{n: n, name: name} }

// Conn is one daemon's endpoint of a Network.
type Conn struct {
	n    *Network
	name string
}

// Send delivers e to its recipient's inbox after a round trip through its
// encoding (and Intercept); it refuses an envelope that claims another
// sender.
func (c Conn) Send(ctx context.Context, e *wire.Envelope) error {
	if e.Sender != c.name {
		return fmt.Errorf("mem network: %s sends as %q", c.name, e.Sender)
	}
	b, err := e.Marshal()
	if err != nil {
		return err
	}
	bs := [][]byte{b}
	if c.n.Intercept != nil {
		bs = c.n.Intercept(b)
	}
	for _, b := range bs {
		d, err := wire.Unmarshal(b)
		if err != nil {
			return err
		}
		select {
		case c.n.box(e.Recipient) <- d:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Inbox delivers the envelopes addressed to this endpoint. It is never
// closed.
func (c Conn) Inbox() <-chan *wire.Envelope { return c.n.box(c.name) }
