// Package federationtest provides test doubles for package federation, as
// net/http/httptest does for net/http: an in-memory network that carries
// envelopes between a coordinator and its sites in one process, and a
// Checkpointer in memory. Nothing here is for production use.
package federationtest

import (
	"context"
	"sync"

	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/federation/internal/memnet"
)

// MemNetwork is an in-memory network of federation.Conns for tests and
// single-process runs. Every envelope is encoded and decoded on its way,
// as over a real transport. Its Intercept field, when set before use, sees
// every encoded envelope and returns the encodings to deliver instead
// (none to drop it, two to duplicate it).
type MemNetwork struct {
	*memnet.Network
}

// NewMemNetwork returns an empty network.
func NewMemNetwork() *MemNetwork { return &MemNetwork{memnet.New()} }

// Endpoint returns the Conn of the daemon named name.
func (n *MemNetwork) Endpoint(name string) federation.Conn { return n.Network.Endpoint(name) }

// MemCheckpoints is a federation.Checkpointer in memory. It keeps the
// encoding of the last state saved, as a file would, so that a loaded state
// shares nothing with the one saved. Its zero value is ready to use.
type MemCheckpoints struct {
	mu sync.Mutex
	b  []byte
	// Saves counts the calls of Save.
	Saves int
}

// Save implements federation.Checkpointer.
func (m *MemCheckpoints) Save(_ context.Context, st *federation.State) error {
	b, err := federation.EncodeState(st)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.b = b
	m.Saves++
	return nil
}

// Load implements federation.Checkpointer.
func (m *MemCheckpoints) Load(context.Context) (*federation.State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.b == nil {
		return nil, nil
	}
	return federation.DecodeState(m.b)
}

// Clear implements federation.Checkpointer.
func (m *MemCheckpoints) Clear(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.b = nil
	return nil
}
