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

	"github.com/crffd/crffd/certs"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/plugins/transport"
)

// Options of this transport, in transport.Config.Options.
const (
	OptionDir     = "dir"
	OptionPoll    = "poll"
	OptionArchive = "archive"
	// OptionUnsigned, when true, runs the transport without certificates:
	// files are bare envelopes, neither signed nor checked, and only the
	// folder's permissions say who wrote them. Without it the transport
	// needs transport.Config.TLS.
	OptionUnsigned = "unsigned"
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
	// rel holds this daemon's certificate, key, federation CA and
	// revocation list, following their files; nil with OptionUnsigned.
	rel   *certs.Reloader
	stamp int64  // last time stamp used in a file name
	seq   uint64 // last sequence number used in a file name
}

var _ transport.Transport = (*Transport)(nil)

// New returns an unconfigured transport that logs to log (nil discards).
func New(log *slog.Logger) *Transport {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Transport{log: log}
}

// Configure checks the options, loads the certificate files (unless
// OptionUnsigned) and creates this daemon's inbox. The certificate must
// name cfg.Name and be of cfg.Role; the files are followed from then on
// (certs.Reloader), so that a renewed certificate signs the next file and
// a new revocation list applies to the next file read.
func (t *Transport) Configure(_ context.Context, cfg transport.Config) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cfg != nil {
		return "", fmt.Errorf("spool transport: configured already: %w", transport.ErrConfig)
	}
	poll, archive, unsigned := DefaultPoll, false, false
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
		case OptionUnsigned:
			unsigned, err = strconv.ParseBool(v)
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
	var rel *certs.Reloader
	if unsigned {
		if cfg.TLS != (certs.Files{}) {
			return "", fmt.Errorf("spool transport: option %s=true, but certificate files are given (transport.Config.TLS, federation.tls): "+
				"drop the option to sign and check every file, or the files to run unsigned: %w", OptionUnsigned, transport.ErrConfig)
		}
	} else {
		var err error
		if rel, err = t.loadIdentity(cfg); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, cfg.Name), dirMode); err != nil {
		return "", fmt.Errorf("spool transport: create inbox: %w: %w", transport.ErrConfig, err)
	}
	capture, err := transport.OpenCapture(cfg.Options[transport.OptionCapture])
	if err != nil {
		return "", err
	}
	if unsigned {
		t.log.Warn("spool transport runs unsigned: files are neither signed nor checked, and only the folder's permissions say who wrote them",
			slog.String(transport.LogKeyPath, dir))
	}
	t.cfg, t.dir, t.poll, t.archive, t.capture, t.rel = &cfg, dir, poll, archive, capture, rel
	return "", nil
}

// loadIdentity loads the daemon's certificate files and checks that the
// certificate is this daemon's, of its role.
func (t *Transport) loadIdentity(cfg transport.Config) (*certs.Reloader, error) {
	for _, f := range []struct{ path, field, key string }{
		{cfg.TLS.CA, "CA", "federation.tls.ca"},
		{cfg.TLS.Cert, "Cert", "federation.tls.cert"},
		{cfg.TLS.Key, "Key", "federation.tls.key"},
	} {
		if f.path == "" {
			return nil, fmt.Errorf("spool transport: no TLS.%s file (%s): the spool signs every file with the daemon's key and checks "+
				"every file it reads against the federation CA; give the daemon's certificate files, or set option %s=true to trust "+
				"the folder's permissions alone: %w", f.field, f.key, OptionUnsigned, transport.ErrConfig)
		}
	}
	rel, err := certs.NewReloader(cfg.TLS, func(id *certs.Identity, err error) { transport.LogReload(t.log, cfg.TLS, id, err) })
	if err != nil {
		return nil, fmt.Errorf("spool transport: %w: %w", transport.ErrConfig, err)
	}
	id := rel.Identity()
	if id.Name != cfg.Name {
		return nil, fmt.Errorf("spool transport: certificate %s names %q, but this daemon is configured as %q: %w",
			cfg.TLS.Cert, id.Name, cfg.Name, transport.ErrConfig)
	}
	if err := id.Can(certRole(cfg.Role)); err != nil {
		return nil, fmt.Errorf("spool transport: %s: %w: %w", cfg.TLS.Cert, transport.ErrConfig, err)
	}
	if cfg.Role == transport.RoleSite && cfg.CoordinatorName == "" {
		return nil, fmt.Errorf("spool transport: no coordinator name: a site must know whose signature to accept: %w", transport.ErrConfig)
	}
	return rel, nil
}

// certRole returns the certificate role of a daemon role.
func certRole(r transport.Role) certs.Role {
	if r == transport.RoleCoordinator {
		return certs.RoleCoordinator
	}
	return certs.RoleSite
}

// identity returns the daemon's current certificate material, or nil when
// the transport runs unsigned.
func (t *Transport) identity() *certs.Identity {
	t.mu.Lock()
	rel := t.rel
	t.mu.Unlock()
	if rel == nil {
		return nil
	}
	return rel.Identity()
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
	file := b
	if id := t.identity(); id != nil {
		if file, err = SignFile(id.Certificate, b); err != nil {
			return fmt.Errorf("spool transport: to %q: %w", e.Recipient, err)
		}
	}
	inbox := filepath.Join(t.dir, e.Recipient) // a federation name is a safe path element
	if err := os.MkdirAll(inbox, dirMode); err != nil {
		return fmt.Errorf("spool transport: inbox of %q: %w: %w", e.Recipient, transport.ErrUnavailable, err)
	}
	stamp, seq := t.next()
	final := filepath.Join(inbox, fileName(stamp, e.Sender, seq))
	if err := writeAtomic(inbox, final, file); err != nil {
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
