package site

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/pipeline"
	"github.com/crffd/crffd/store"
)

// read reads and validates the site's records and hashes their
// identities, for the next run.
func (s *federated) read(ctx context.Context) (*store.Records, []wire.Digest, error) {
	src := s.cfg.Source
	recs, err := s.cfg.DB.ReadRecords(ctx, src)
	if err != nil {
		return nil, nil, err
	}
	if recs.Len() == 0 {
		return nil, nil, fmt.Errorf("site %s: no valid rows to train on", src.DB)
	}
	pipeline.WarnUnused(s.log, src, recs)
	if len(recs.Rejected) > 0 {
		s.log.Warn("rows left out (on_invalid: skip); see crff_rejected", slog.String(logKeyDB, src.DB), slog.Int(logKeyRows, len(recs.Rejected)))
	}
	ids, err := identityHashes(ctx, s.log, s.cfg.DB, recs, s.f.Secret)
	if err != nil {
		return nil, nil, err
	}
	return recs, ids, nil
}

// identityHashes returns the HMAC, keyed with secret, of every kept row's
// identity columns, or nil when de-duplication is not configured.
func identityHashes(ctx context.Context, log *slog.Logger, db *store.Site, recs *store.Records, secret []byte) ([]wire.Digest, error) {
	cols := recs.Layout.Identity
	switch {
	case len(cols) == 0:
		log.Info("no identity columns configured: this site's rows are not de-duplicated")
		return nil, nil
	case len(secret) == 0:
		return nil, errors.New("site.identity_columns is set but federation.secret is empty: set the sites' shared secret (CRFFD_FEDERATION_SECRET)")
	}
	byID, err := db.ReadIdentities(ctx, recs.Layout)
	if err != nil {
		return nil, err
	}
	out := make([]wire.Digest, len(recs.IDs))
	incomplete := 0
	for i, id := range recs.IDs {
		v, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("identity columns of row %v: row vanished while reading", id)
		}
		if !federation.IdentityComplete(v) {
			incomplete++
		}
		out[i] = federation.IdentityHMAC(secret, v)
	}
	if incomplete > 0 {
		log.Warn("rows with an empty identity column are never taken for duplicates",
			logKeyRows, incomplete, logKeyTotal, len(recs.IDs))
	}
	return out, nil
}
