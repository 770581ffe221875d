package site

import (
	"context"
	"errors"
	"log/slog"

	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/store"
)

// joinRun returns the federation.SiteConfig.Join hook of a site taking
// part in runs with the rows recs returns (those of the run at hand). It
// records the run's rows in the site file (store.Site.JoinRun), refusing a
// run whose rows differ from those of an earlier run by at least one and
// fewer than least rows, since the difference of the two runs' sums would
// come that close to single records, and a rejoined run whose rows are not
// those it began with. It is called before the site answers the run's
// hello, so a refused run has sent nothing computed from the rows and
// leaves no record. A refusal's error also matches the federation sentinel
// of the same rule (sameRule), so that the site tells the coordinator why
// it refuses the run; other errors stop the site without a word.
func joinRun(log *slog.Logger, db *store.Site, name string, recs func() *store.Records, least int) func(context.Context, string) error {
	return func(ctx context.Context, run string) error {
		err := db.JoinRun(ctx, name, run, recs(), least)
		var ce *store.RowChangeError
		switch {
		case errors.As(err, &ce):
			log.Error("run refused: the site's rows differ too little from an earlier run's",
				slog.String(logKeyName, name), slog.String(logKeyRun, run), slog.String(logKeyEarlierRun, ce.Run),
				slog.Int(logKeyChanged, ce.Total()), slog.Int(logKeyLeast, least))
			return sameRule{err, federation.ErrTooFewChanged}
		case errors.Is(err, store.ErrRunRowsChanged):
			log.Error("run refused: the site's rows changed since it began the run",
				slog.String(logKeyName, name), slog.String(logKeyRun, run))
			return sameRule{err, federation.ErrRowsChanged}
		}
		return err
	}
}

// sameRule is a store refusal that also matches the federation sentinel
// naming the same rule: store does not import federation, so the site
// daemon, which imports both, states that the one is the other. Its
// message is the store error's.
type sameRule struct{ err, rule error }

func (e sameRule) Error() string { return e.err.Error() }

// Unwrap returns the store error and the federation sentinel.
func (e sameRule) Unwrap() []error { return []error{e.err, e.rule} }

// auditEntry describes an envelope for crff_audit, without its values.
func auditEntry(d federation.Direction, e *wire.Envelope) store.AuditEntry {
	dir, peer := store.Received, e.Sender
	if d == federation.Sent {
		dir, peer = store.Sent, e.Recipient
	}
	ts := make([]store.TensorInfo, 0, len(e.Tensors()))
	for _, t := range e.Tensors() {
		ts = append(ts, store.TensorInfo{Name: t.Name, Shape: t.Shape})
	}
	for _, l := range e.DigestLists() {
		ts = append(ts, store.TensorInfo{Name: l.Name, Shape: []int{len(l.Digests), wire.DigestSize}})
	}
	return store.AuditEntry{Direction: dir, Peer: peer, Kind: e.Kind.String(), Run: e.RunID, Model: e.Model,
		Round: int(e.Round), Tensors: ts, Bytes: e.PayloadBytes(), Digest: e.PayloadDigest().String()}
}
