package spool

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crffd/crffd/certs"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/plugins/transport"
)

// Receive polls this daemon's inbox and delivers its envelopes in order of
// sending, deleting or archiving each once delivered.
func (t *Transport) Receive(ctx context.Context, deliver func(*wire.Envelope) error) error {
	cfg, err := t.config()
	if err != nil {
		return err
	}
	inbox := filepath.Join(t.dir, cfg.Name)
	for {
		if err := t.drain(ctx, cfg, inbox, deliver); err != nil {
			return err
		}
		select {
		case <-time.After(t.poll):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// drain delivers every envelope now in the inbox.
func (t *Transport) drain(ctx context.Context, cfg transport.Config, inbox string, deliver func(*wire.Envelope) error) error {
	entries, err := os.ReadDir(inbox) // sorted by name, that is by time stamp
	if err != nil {
		return fmt.Errorf("spool transport: read inbox: %w", err)
	}
	id := t.identity() // the CA and revocation list current now
	for _, ent := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		name := ent.Name()
		path := filepath.Join(inbox, name)
		switch {
		case isTemp(name):
			t.removeStaleTemp(path)
			continue
		case strings.HasPrefix(name, ".") || !ent.Type().IsRegular():
			continue
		}
		e, reason := t.read(cfg, id, path, name)
		if reason != "" {
			t.reject(inbox, name, reason)
			continue
		}
		if err := deliver(e); err != nil {
			return err // the file stays for the next Receive
		}
		t.done(inbox, name)
	}
	return nil
}

// read loads and checks one file: with id, its signature and signer (see
// authenticate), and then the envelope. It returns why it refuses the
// file, or "". A reason never holds payload values.
func (t *Transport) read(cfg transport.Config, id *certs.Identity, path, name string) (*wire.Envelope, string) {
	limit := int64(wire.MaxEnvelopeBytes)
	if id != nil {
		limit = int64(MaxFileBytes)
	}
	b, err := readLimited(path, limit)
	if err != nil {
		return nil, err.Error()
	}
	envelope, signer, reason := b, "", ""
	switch {
	case id != nil:
		var f *File
		if f, err = DecodeFile(b); err != nil {
			reason = err.Error()
			break
		}
		envelope = f.Envelope
		signer, reason = authenticate(cfg, id, f, name)
	case bytes.HasPrefix(b, []byte(Magic)):
		reason = fmt.Sprintf("a signed file, but this transport runs with %s=true and cannot check signatures", OptionUnsigned)
	}
	if err := t.capture.Record(transport.Received, envelope); err != nil {
		t.log.Error("capture failed", slog.String(transport.LogKeyError, err.Error()))
	}
	if reason != "" {
		return nil, reason
	}
	e, err := wire.Unmarshal(envelope)
	switch {
	case err != nil:
		return nil, "invalid envelope: " + err.Error()
	case e.Recipient != cfg.Name:
		return nil, fmt.Sprintf("recipient %q is not %q", e.Recipient, cfg.Name)
	case id != nil && e.Sender != signer:
		return nil, fmt.Sprintf("envelope names sender %q, but %q signed it", e.Sender, signer)
	case senderOf(name) != e.Sender: // with id, the signer is the file name's sender
		return nil, fmt.Sprintf("file name names sender %q, envelope names %q", senderOf(name), e.Sender)
	case cfg.Role == transport.RoleSite && cfg.CoordinatorName != "" && e.Sender != cfg.CoordinatorName:
		return nil, fmt.Sprintf("sender %q is not the coordinator %q", e.Sender, cfg.CoordinatorName)
	}
	t.log.Debug("envelope received", slog.Any(transport.LogKeyEnvelope, e), slog.String(transport.LogKeyPath, path))
	return e, ""
}

// readLimited reads the file at path, refusing one of more than limit
// bytes without reading it all, even if it grows while being read.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("stat: %w", err)
	} else if fi.Size() > limit {
		return nil, fmt.Errorf("%d bytes, more than %d", fi.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("more than %d bytes", limit)
	}
	return b, nil
}

// authenticate checks a signed file named name: its signature verifies
// with the certificate it carries, that certificate passes
// certs.Identity.Authenticate for the role of this daemon's peers (a site
// hears from the coordinator, the coordinator from sites), and its
// federation name is the sender the file name names. It returns that name,
// or why it refuses the file.
func authenticate(cfg transport.Config, id *certs.Identity, f *File, name string) (signer, reason string) {
	cert, err := f.Verify()
	if err != nil {
		return "", err.Error()
	}
	peer := certs.RoleSite
	if cfg.Role == transport.RoleSite {
		peer = certs.RoleCoordinator
	}
	signer, err = id.Authenticate(cert, peer, time.Now())
	if err != nil {
		return "", "signer: " + err.Error()
	}
	if from := senderOf(name); from != signer {
		return "", fmt.Sprintf("file name names sender %q, but %q signed it", from, signer)
	}
	return signer, ""
}

// done deletes or archives a delivered file.
func (t *Transport) done(inbox, name string) {
	path := filepath.Join(inbox, name)
	var err error
	if t.archive {
		err = moveInto(filepath.Join(inbox, archiveDir), path, name)
	} else {
		err = os.Remove(path)
	}
	if err != nil {
		t.log.Error("cannot remove a delivered envelope; it will be delivered again",
			slog.String(transport.LogKeyPath, path), slog.String(transport.LogKeyError, err.Error()))
	}
}

// reject moves a refused file out of the way and logs why.
func (t *Transport) reject(inbox, name, reason string) {
	path := filepath.Join(inbox, name)
	t.log.Warn("refused an envelope file", slog.String(transport.LogKeyPath, path), slog.String(transport.LogKeyReason, reason))
	if err := moveInto(filepath.Join(inbox, rejectDir), path, name); err != nil {
		t.log.Error("cannot move a refused envelope file", slog.String(transport.LogKeyPath, path), slog.String(transport.LogKeyError, err.Error()))
	}
}

// removeStaleTemp removes a temporary file older than staleTemp: its
// writer crashed before renaming it.
func (t *Transport) removeStaleTemp(path string) {
	fi, err := os.Stat(path)
	if err != nil || time.Since(fi.ModTime()) < staleTemp {
		return
	}
	if err := os.Remove(path); err == nil {
		t.log.Info("removed a temporary file left by a writer", slog.String(transport.LogKeyPath, path))
	}
}

// moveInto renames path into dir, creating dir if needed.
func moveInto(dir, path, name string) error {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return err
	}
	return os.Rename(path, filepath.Join(dir, name))
}
