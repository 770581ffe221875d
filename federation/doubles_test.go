package federation

import (
	"context"
	"sync"

	"github.com/crffd/crffd/federation/internal/memnet"
)

// NewMemNetwork returns an empty in-memory network: federationtest's, for
// this package's own tests, which cannot import federationtest (it imports
// federation).
func NewMemNetwork() *memnet.Network { return memnet.New() }

// memCheckpoints is federationtest.memCheckpoints for this package's own
// tests, which cannot import federationtest (it imports federation).
type memCheckpoints struct {
	mu sync.Mutex
	b  []byte
	// Saves counts the calls of Save.
	Saves int
}

func (m *memCheckpoints) Save(_ context.Context, st *State) error {
	b, err := EncodeState(st)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.b = b
	m.Saves++
	return nil
}

func (m *memCheckpoints) Load(context.Context) (*State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.b == nil {
		return nil, nil
	}
	return DecodeState(m.b)
}

func (m *memCheckpoints) Clear(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.b = nil
	return nil
}
