package federation

import (
	"context"
	"fmt"
	"sync"

	"github.com/crffd/crffd/federation/wire"
)

// Conn is the message channel a role talks over: a transport plugin's
// client, or an endpoint of a MemNetwork.
type Conn interface {
	// Send hands e to the channel for delivery to e.Recipient.
	Send(ctx context.Context, e *wire.Envelope) error
	// Inbox delivers the envelopes addressed to this daemon. It is closed
	// when the channel fails or ends.
	Inbox() <-chan *wire.Envelope
}

// MemNetwork is an in-memory network of Conns for tests and single-process
// runs. Every envelope is encoded and decoded on its way, as over a real
// transport.
type MemNetwork struct {
	mu    sync.Mutex
	boxes map[string]chan *wire.Envelope
	// Intercept, when set before use, sees every encoded envelope and
	// returns the encodings to deliver instead (none to drop it, two to
	// duplicate it).
	Intercept func(b []byte) [][]byte
}

// NewMemNetwork returns an empty network.
func NewMemNetwork() *MemNetwork { return &MemNetwork{boxes: map[string]chan *wire.Envelope{}} }

func (n *MemNetwork) box(name string) chan *wire.Envelope {
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
func (n *MemNetwork) Endpoint(name string) Conn { return memConn{n: n, name: name} }

type memConn struct {
	n    *MemNetwork
	name string
}

func (c memConn) Send(ctx context.Context, e *wire.Envelope) error {
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

func (c memConn) Inbox() <-chan *wire.Envelope { return c.n.box(c.name) }
