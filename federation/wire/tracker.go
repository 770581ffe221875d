package wire

import (
	"errors"
	"fmt"
	"sync"
)

// Verdict is how a Tracker classifies an incoming envelope.
type Verdict int

const (
	// Current: the envelope belongs to the current run and round and was
	// not seen before. Process it.
	Current Verdict = iota
	// Duplicate: the same envelope (header and payload digest) was already
	// admitted this round, for example resent after a reconnect. Drop it;
	// a daemon may answer it again, since rounds are idempotent.
	Duplicate
	// Stale: the envelope belongs to another run or to a past round.
	// Drop it and log why.
	Stale
	// Future: the envelope belongs to the current run but a later round.
	// A coordinator drops it; a site that rejoins may Advance to it and
	// admit it again.
	Future
)

// String returns the verdict's name.
func (v Verdict) String() string {
	switch v {
	case Current:
		return "current"
	case Duplicate:
		return "duplicate"
	case Stale:
		return "stale"
	case Future:
		return "future"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Errors returned by Tracker.Admit with every verdict but Current.
var (
	// ErrDuplicate accompanies Duplicate.
	ErrDuplicate = errors.New("duplicate envelope")
	// ErrStale accompanies Stale.
	ErrStale = errors.New("stale envelope")
	// ErrFuture accompanies Future.
	ErrFuture = errors.New("envelope for a future round")
	// ErrRewind is returned by Advance for a round before the current one.
	ErrRewind = errors.New("round may not move backwards")
)

// Key identifies an envelope for duplicate detection: two envelopes with
// equal keys carry the same message.
type Key struct {
	Header
	Digest Digest
}

// Key returns the envelope's identity: its header and payload digest.
func (e *Envelope) Key() Key { return Key{Header: e.Header, Digest: e.digest} }

// Tracker classifies incoming envelopes against the current run and round
// (the position) and remembers the envelopes admitted in the current round
// to recognise duplicates. Rounds must increase monotonically over a run
// (a daemon may number every message of a run, hello to done, on one
// counter). A Tracker is safe for concurrent use.
type Tracker struct {
	mu    sync.Mutex
	run   string
	round uint64
	seen  map[Key]struct{}
}

// NewTracker returns a tracker positioned at run runID, round round.
func NewTracker(runID string, round uint64) *Tracker {
	return &Tracker{run: runID, round: round, seen: make(map[Key]struct{})}
}

// Position returns the current run and round.
func (t *Tracker) Position() (runID string, round uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.run, t.round
}

// Advance moves to round within the current run and forgets the envelopes
// of earlier rounds, which are stale from now on. Moving backwards is an
// ErrRewind error; staying on the round changes nothing.
func (t *Tracker) Advance(round uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case round < t.round:
		return fmt.Errorf("wire: advance run %q from round %d to %d: %w", t.run, t.round, round, ErrRewind)
	case round > t.round:
		t.round = round
		clear(t.seen)
	}
	return nil
}

// Reset moves to another run and round and forgets every envelope seen.
func (t *Tracker) Reset(runID string, round uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.run, t.round = runID, round
	clear(t.seen)
}

// Admit classifies e and, when it is Current, remembers it so that a
// second copy is a Duplicate. The error is nil for Current and otherwise
// wraps ErrDuplicate, ErrStale or ErrFuture in an *Error whose message
// gives the reason for the log. Admit does not validate e: envelopes from
// Unmarshal, FromProto or a transport Client are valid already.
func (t *Tracker) Admit(e *Envelope) (Verdict, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var v Verdict
	var err error
	switch {
	case e.RunID != t.run:
		v, err = Stale, fmt.Errorf("run %q is not the current run %q: %w", e.RunID, t.run, ErrStale)
	case e.Round < t.round:
		v, err = Stale, fmt.Errorf("round %d is past, the current round is %d: %w", e.Round, t.round, ErrStale)
	case e.Round > t.round:
		v, err = Future, fmt.Errorf("round %d is ahead of the current round %d: %w", e.Round, t.round, ErrFuture)
	default:
		k := e.Key()
		if _, ok := t.seen[k]; ok {
			v, err = Duplicate, fmt.Errorf("payload sha256 %s already received this round: %w", e.digest, ErrDuplicate)
		} else {
			t.seen[k] = struct{}{}
		}
	}
	if err != nil {
		return v, &Error{Header: e.Header, Err: err}
	}
	return Current, nil
}
