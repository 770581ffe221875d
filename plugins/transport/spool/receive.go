package spool

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

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
		if err := t.drain(ctx, cfg.Name, inbox, deliver); err != nil {
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
func (t *Transport) drain(ctx context.Context, self, inbox string, deliver func(*wire.Envelope) error) error {
	entries, err := os.ReadDir(inbox) // sorted by name, that is by time stamp
	if err != nil {
		return fmt.Errorf("spool transport: read inbox: %w", err)
	}
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
		e, reason := t.read(self, path, name)
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

// read loads and checks one file. It returns why it refuses the file, or "".
func (t *Transport) read(self, path, name string) (*wire.Envelope, string) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, "stat: " + err.Error()
	}
	if fi.Size() > wire.MaxEnvelopeBytes {
		return nil, fmt.Sprintf("%d bytes, more than %d", fi.Size(), wire.MaxEnvelopeBytes)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "read: " + err.Error()
	}
	if err := t.capture.Record(transport.Received, b); err != nil {
		t.log.Error("capture failed", slog.String(transport.LogKeyError, err.Error()))
	}
	e, err := wire.Unmarshal(b)
	switch {
	case err != nil:
		return nil, "invalid envelope: " + err.Error()
	case e.Recipient != self:
		return nil, fmt.Sprintf("recipient %q is not %q", e.Recipient, self)
	case senderOf(name) != e.Sender:
		return nil, fmt.Sprintf("file name names sender %q, envelope names %q", senderOf(name), e.Sender)
	}
	t.log.Debug("envelope received", slog.Any(transport.LogKeyEnvelope, e), slog.String(transport.LogKeyPath, path))
	return e, ""
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
