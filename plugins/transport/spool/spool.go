package spool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/plugins/transport"
)

// Options of this transport, in transport.Config.Options.
const (
	OptionDir     = "dir"
	OptionPoll    = "poll"
	OptionArchive = "archive"
)

// Defaults and file names.
const (
	DefaultPoll = 200 * time.Millisecond
	archiveDir  = ".archive"
	rejectDir   = ".rejected"
	tmpPrefix   = ".tmp-"
	suffix      = ".env"
	// staleTemp is the age after which a temporary file is a writer's leftover.
	staleTemp = time.Hour
	dirMode   = 0o770
	fileMode  = 0o640
)

// Transport is the spool transport. It implements transport.Transport.
type Transport struct {
	log *slog.Logger

	mu      sync.Mutex
	cfg     *transport.Config
	dir     string
	poll    time.Duration
	archive bool
	capture *transport.Capture
	stamp   int64  // last time stamp used in a file name
	seq     uint64 // last sequence number used in a file name
}

var _ transport.Transport = (*Transport)(nil)

// New returns an unconfigured transport that logs to log (nil discards).
func New(log *slog.Logger) *Transport {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Transport{log: log}
}

// Configure checks the options and creates this daemon's inbox.
func (t *Transport) Configure(_ context.Context, cfg transport.Config) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cfg != nil {
		return "", fmt.Errorf("spool transport: configured already: %w", transport.ErrConfig)
	}
	poll, archive := DefaultPoll, false
	for k, v := range cfg.Options {
		var err error
		switch k {
		case OptionDir, transport.OptionCapture, transport.OptionLogLevel:
		case OptionPoll:
			poll, err = time.ParseDuration(v)
			if err == nil && poll <= 0 {
				err = errors.New("must be positive")
			}
		case OptionArchive:
			archive, err = strconv.ParseBool(v)
		default:
			err = errors.New("unknown option")
		}
		if err != nil {
			return "", fmt.Errorf("spool transport: option %s=%q: %v: %w", k, v, err, transport.ErrConfig)
		}
	}
	dir := cfg.Options[OptionDir]
	if dir == "" {
		return "", fmt.Errorf("spool transport: option %s (the shared directory) is required: %w", OptionDir, transport.ErrConfig)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("spool transport: %s=%q is not a directory: %w", OptionDir, dir, transport.ErrConfig)
	}
	if err := os.MkdirAll(filepath.Join(dir, cfg.Name), dirMode); err != nil {
		return "", fmt.Errorf("spool transport: create inbox: %w: %w", transport.ErrConfig, err)
	}
	capture, err := transport.OpenCapture(cfg.Options[transport.OptionCapture])
	if err != nil {
		return "", err
	}
	t.cfg, t.dir, t.poll, t.archive, t.capture = &cfg, dir, poll, archive, capture
	return "", nil
}

func (t *Transport) config() (transport.Config, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cfg == nil {
		return transport.Config{}, transport.ErrNotConfigured
	}
	return *t.cfg, nil
}

// next returns the time stamp and sequence number of the next file name,
// both strictly increasing.
func (t *Transport) next() (int64, uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stamp = max(time.Now().UnixNano(), t.stamp+1)
	t.seq++
	return t.stamp, t.seq
}

// fileName returns the name under which an envelope is delivered.
func fileName(stamp int64, sender string, seq uint64) string {
	return fmt.Sprintf("%020d-%s-%010d%s", stamp, sender, seq%1e10, suffix)
}

// senderOf returns the sender part of a delivered file's name, or "".
func senderOf(name string) string {
	const stampLen, seqLen = 20, 10
	if !strings.HasSuffix(name, suffix) || len(name) < stampLen+seqLen+len(suffix)+3 {
		return ""
	}
	core := strings.TrimSuffix(name, suffix)
	stamp, rest := core[:stampLen], core[stampLen:]
	seq := rest[len(rest)-seqLen:]
	if !allDigits(stamp) || !allDigits(seq) || rest[0] != '-' || rest[len(rest)-seqLen-1] != '-' {
		return ""
	}
	return rest[1 : len(rest)-seqLen-1]
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Send writes e into its recipient's inbox: to a temporary file first,
// then renamed, so that the recipient never reads a partial envelope.
func (t *Transport) Send(ctx context.Context, e *wire.Envelope) error {
	cfg, err := t.config()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if e.Recipient == cfg.Name {
		return fmt.Errorf("spool transport: %q cannot send to itself: %w", cfg.Name, transport.ErrRecipient)
	}
	b, err := e.Marshal()
	if err != nil {
		return fmt.Errorf("%w: %w", transport.ErrEnvelope, err)
	}
	inbox := filepath.Join(t.dir, e.Recipient) // a federation name is a safe path element
	if err := os.MkdirAll(inbox, dirMode); err != nil {
		return fmt.Errorf("spool transport: inbox of %q: %w: %w", e.Recipient, transport.ErrUnavailable, err)
	}
	stamp, seq := t.next()
	final := filepath.Join(inbox, fileName(stamp, e.Sender, seq))
	if err := writeAtomic(inbox, final, b); err != nil {
		return fmt.Errorf("spool transport: deliver to %q: %w: %w", e.Recipient, transport.ErrUnavailable, err)
	}
	if err := t.capture.Record(transport.Sent, b); err != nil {
		t.log.Error("capture failed", slog.String(transport.LogKeyError, err.Error()))
	}
	t.log.Debug("envelope spooled", slog.Any(transport.LogKeyEnvelope, e), slog.String(transport.LogKeyPath, final))
	return nil
}

// writeAtomic writes b to a temporary file in dir, syncs it, renames it to
// final and syncs dir. On failure the temporary file is removed.
func writeAtomic(dir, final string, b []byte) (err error) {
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(b); err == nil {
		if err = f.Chmod(fileMode); err == nil {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err = os.Rename(tmp, final); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		d.Sync() // best effort: makes the rename durable on most file systems
		d.Close()
	}
	return nil
}

// isTemp reports whether a directory entry is a temporary file.
func isTemp(name string) bool { return strings.HasPrefix(name, tmpPrefix) }

// Close closes the capture file.
func (t *Transport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.capture.Close()
}
