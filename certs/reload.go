package certs

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Reloader holds a daemon's certificate material and follows its files:
// a daemon runs for months, while its certificate is renewed (crffd certs
// renew NAME) long before it expires and the revocation list changes, and
// restarting a site daemon for that would break the runs it takes part in.
//
// Before handing out the identity, Reloader compares each file's
// modification time, size and inode with what it saw at the last read, and
// reads them all again when any differs. New files that do not load as
// Load requires, or whose certificate names another daemon, are not used:
// the previous identity stays, the error goes to the report function, and
// the files are read again only once they change again. The one exception
// is a revocation list that revokes the daemon's own certificate: its
// other entries are used all the same. A reloader is safe for concurrent
// use.
type Reloader struct {
	files  Files
	name   string
	report func(*Identity, error)

	mu   sync.Mutex
	id   *Identity
	seen [4]stamp // of files.CA, Cert, Key and CRL when last read
}

// stamp is what a file looked like when it was read, to notice a new file
// at the same path.
type stamp struct {
	info os.FileInfo // nil if os.Stat failed
	err  string
}

func stampOf(path string) stamp {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{err: err.Error()}
	}
	return stamp{info: fi}
}

// same reports whether s and o describe the same version of a file. The
// inode matters as much as the time: renew replaces files by renaming,
// and a new key has the size of the old one.
func (s stamp) same(o stamp) bool {
	if s.info == nil || o.info == nil {
		return s.info == nil && o.info == nil && s.err == o.err
	}
	return os.SameFile(s.info, o.info) && s.info.Size() == o.info.Size() && s.info.ModTime().Equal(o.info.ModTime())
}

func (r *Reloader) stamps() [4]stamp {
	return [4]stamp{stampOf(r.files.CA), stampOf(r.files.Cert), stampOf(r.files.Key), stampOf(r.files.CRL)}
}

// NewReloader loads f as Load does and returns a Reloader that follows the
// files. report, if not nil, is called after each reload caused by changed
// files, with the identity in use after it: the new one and a nil error,
// or the previous one and the error that kept it. It is called without the
// reloader's lock held, from whichever goroutine noticed the change (a TLS
// handshake, or Refresh).
func NewReloader(f Files, report func(*Identity, error)) (*Reloader, error) {
	r := &Reloader{files: f, report: report}
	r.seen = r.stamps()
	id, err := Load(f)
	if err != nil {
		return nil, err
	}
	r.id, r.name = id, id.Name
	return r, nil
}

// Identity returns the current identity, reading the files again first if
// they changed since they were last read.
func (r *Reloader) Identity() *Identity {
	id, _, _ := r.Refresh()
	return id
}

// Refresh reads the files again if they changed since they were last read,
// and returns the current identity, whether that is a newly loaded one,
// and why changed files were not used (nil when they were used, or did not
// change). Calling it periodically, besides the calls of every handshake,
// brings a renewal, or a broken one, to light without waiting for the next
// connection.
func (r *Reloader) Refresh() (id *Identity, renewed bool, err error) {
	r.mu.Lock()
	now := r.stamps()
	if r.sameAsSeen(now) {
		id = r.id
		r.mu.Unlock()
		return id, false, nil
	}
	// Stamps are taken before reading, so that a file replaced while it is
	// read differs from them at the next call and is read again. A load
	// that fails while the files are still changing (Renew renames the key,
	// then the certificate) is tried again at once rather than reported.
	var next *Identity
	for try := 0; ; try++ {
		r.seen = now
		next, err = load(r.files)
		if err == nil && next.Name != r.name {
			err = fmt.Errorf("certs: %s now names %q, but this daemon is %q: %w", r.files.Cert, next.Name, r.name, ErrName)
		}
		if err == nil || try == 2 {
			break
		}
		if now = r.stamps(); r.sameAsSeen(now) {
			break
		}
	}
	if err != nil {
		if errors.Is(err, ErrRevoked) && next != nil && next.Name == r.name {
			// This daemon's own certificate is revoked: peers will refuse
			// it, and it must still refuse the others on the list.
			keep := *r.id
			keep.revoked = next.revoked
			r.id, renewed = &keep, true
		}
		err = fmt.Errorf("certs: changed files of %q not used, keeping its certificate valid until %s: %w",
			r.name, r.id.Leaf.NotAfter.UTC().Format(time.RFC3339), err)
	} else {
		r.id, renewed = next, true
	}
	id = r.id
	r.mu.Unlock()
	if r.report != nil {
		r.report(id, err)
	}
	return id, renewed, err
}

func (r *Reloader) sameAsSeen(now [4]stamp) bool {
	for i := range now {
		if !now[i].same(r.seen[i]) {
			return false
		}
	}
	return true
}

// Watch calls Refresh every interval until ctx ends.
func (r *Reloader) Watch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.Refresh()
		}
	}
}

// ServerConfig returns the coordinator's TLS configuration, as
// Identity.ServerConfig, except that every handshake uses the identity
// current at that time: its certificate and its CA pool for verifying
// clients.
func (r *Reloader) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.Identity().ServerConfig(), nil
		},
	}
}

// ClientConfig returns a site's TLS configuration, as
// Identity.ClientConfig, except that every handshake presents the
// certificate current at that time. The CA pool that verifies the server
// is the one current when ClientConfig is called: crypto/tls has no hook
// to change it per handshake, so a client that must follow a changed
// ca.crt builds a new configuration when Refresh reports a renewal.
func (r *Reloader) ClientConfig(serverName string) *tls.Config {
	c := r.Identity().ClientConfig(serverName)
	c.Certificates = nil
	c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &r.Identity().Certificate, nil
	}
	c.VerifyConnection = func(cs tls.ConnectionState) error { return r.Identity().verifyPeer(cs) }
	return c
}
