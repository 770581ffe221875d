package grpcnet

import (
	"context"
	"sync"

	"github.com/crffd/crffd/federation/wire"
)

// inbox is a bounded FIFO of received envelopes. Receive peeks at the head
// and pops it only once the daemon has it, so that an envelope is not lost
// when the daemon's stream breaks.
type inbox struct {
	mu      sync.Mutex
	items   []*wire.Envelope
	max     int
	changed chan struct{} // closed and replaced on every change
}

func newInbox(max int) *inbox { return &inbox{max: max, changed: make(chan struct{})} }

// broadcast wakes every waiter; the caller holds mu.
func (q *inbox) broadcast() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// push appends e, waiting while the inbox is full.
func (q *inbox) push(ctx context.Context, e *wire.Envelope) error {
	for {
		q.mu.Lock()
		if len(q.items) < q.max {
			q.items = append(q.items, e)
			q.broadcast()
			q.mu.Unlock()
			return nil
		}
		ch := q.changed
		q.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// peek returns the head, waiting while the inbox is empty.
func (q *inbox) peek(ctx context.Context) (*wire.Envelope, error) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			e := q.items[0]
			q.mu.Unlock()
			return e, nil
		}
		ch := q.changed
		q.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// pop removes the head.
func (q *inbox) pop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) > 0 {
		q.items[0] = nil
		q.items = q.items[1:]
		q.broadcast()
	}
}

// receive delivers the inbox's envelopes in order until ctx ends or
// deliver fails; the envelope deliver failed on stays at the head.
func (q *inbox) receive(ctx context.Context, deliver func(*wire.Envelope) error) error {
	for {
		e, err := q.peek(ctx)
		if err != nil {
			return err
		}
		if err := deliver(e); err != nil {
			return err
		}
		q.pop()
	}
}
