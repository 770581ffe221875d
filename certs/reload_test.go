package certs_test

import (
	"context"
	"crypto/tls"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crffd/crffd/certs"
)

// reports collects what a Reloader reports.
type reports struct {
	mu   sync.Mutex
	errs []error
	ids  []*certs.Identity
}

func (r *reports) report(id *certs.Identity, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids, r.errs = append(r.ids, id), append(r.errs, err)
}

func (r *reports) last(t *testing.T) error {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) == 0 {
		t.Fatal("nothing reported")
	}
	return r.errs[len(r.errs)-1]
}

func (r *reports) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errs)
}

// serialSeen returns a copy of c that records the serial number of the
// certificate the peer presents.
func serialSeen(c *tls.Config) (*tls.Config, func() *big.Int) {
	c = c.Clone()
	var mu sync.Mutex
	var seen *big.Int
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		mu.Lock()
		defer mu.Unlock()
		seen = cs.PeerCertificates[0].SerialNumber
		return nil
	}
	return c, func() *big.Int { mu.Lock(); defer mu.Unlock(); return seen }
}

func serialOf(t *testing.T, path string) *big.Int {
	t.Helper()
	id, err := certs.Load(certs.Files{CA: filepath.Join(filepath.Dir(path), certs.CACertFile), Cert: path, Key: strings.TrimSuffix(path, ".crt") + ".key"})
	if err != nil {
		t.Fatal(err)
	}
	return id.Leaf.SerialNumber
}

// TestReloaderServer replaces the coordinator's files under a server
// configuration built by Reloader: a renewed certificate is presented at
// the next handshake; garbage, a key of another certificate, a missing file
// and a certificate of another name keep the last good one and are
// reported naming the file; the CA pool follows ca.crt.
func TestReloaderServer(t *testing.T) {
	caDir, otherCA := newCA(t), newCA(t)
	dir := t.TempDir()
	for _, n := range []string{"coordinator", "site-a"} {
		if _, err := certs.Issue(caDir, dir, req(n)); err != nil {
			t.Fatal(err)
		}
	}
	files := certs.FilesIn(dir, "coordinator")
	var rep reports
	rel, err := certs.NewReloader(files, rep.report)
	if err != nil {
		t.Fatal(err)
	}
	server := rel.ServerConfig()
	if server.MinVersion != tls.VersionTLS13 {
		t.Errorf("MinVersion %x", server.MinVersion)
	}
	plain, err := certs.ClientConfig(certs.FilesIn(dir, "site-a"), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	client, seen := serialSeen(plain)
	shake := func(what string, want *big.Int) {
		t.Helper()
		name, serr, cerr := handshake(t, server, client)
		if serr != nil || cerr != nil || name != "site-a" {
			t.Fatalf("%s: server sees %q, errors %v / %v", what, name, serr, cerr)
		}
		if got := seen(); got.Cmp(want) != 0 {
			t.Errorf("%s: coordinator presented serial %v, want %v", what, got, want)
		}
	}
	first := serialOf(t, files.Cert)
	shake("before renewal", first)
	if _, renewed, err := rel.Refresh(); renewed || err != nil || rep.count() != 0 {
		t.Errorf("Refresh of unchanged files: renewed %v, %v, %d reports", renewed, err, rep.count())
	}

	if _, err := certs.Renew(caDir, dir, certs.Request{Name: "coordinator"}); err != nil {
		t.Fatal(err)
	}
	second := serialOf(t, files.Cert)
	shake("after renewal", second)
	if err := rep.last(t); err != nil || rep.count() != 1 || rep.ids[0].Leaf.SerialNumber.Cmp(second) != 0 {
		t.Errorf("renewal reported %v (%d reports)", err, rep.count())
	}

	good, _ := os.ReadFile(files.Cert)
	goodKey, _ := os.ReadFile(files.Key)
	otherKey, _ := os.ReadFile(filepath.Join(caDir, certs.CAKeyFile))
	siteCert, _ := os.ReadFile(filepath.Join(dir, "site-a.crt"))
	siteKey, _ := os.ReadFile(filepath.Join(dir, "site-a.key"))
	for _, tc := range []struct {
		name  string
		spoil func()
		want  error
		msg   string
	}{
		{"garbage", func() { os.WriteFile(files.Cert, []byte("not a certificate"), 0o644) }, certs.ErrInvalid, files.Cert},
		{"key of another certificate", func() { os.WriteFile(files.Key, otherKey, 0o600) }, certs.ErrInvalid, files.Key},
		{"missing key", func() { os.Remove(files.Key) }, os.ErrNotExist, files.Key},
		{"another name", func() {
			os.WriteFile(files.Cert, siteCert, 0o644)
			os.WriteFile(files.Key, siteKey, 0o600)
		}, certs.ErrName, `names "site-a", but this daemon is "coordinator"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := rep.count()
			tc.spoil()
			shake(tc.name, second)
			err := rep.last(t)
			if rep.count() != n+1 || !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) ||
				!strings.Contains(err.Error(), `changed files of "coordinator" not used, keeping its certificate valid until`) {
				t.Errorf("reported %v (%d reports, want %d), want %v naming %q", err, rep.count(), n+1, tc.want, tc.msg)
			}
			// The same broken files are not read, nor reported, again.
			shake(tc.name+", again", second)
			if rep.count() != n+1 {
				t.Errorf("unchanged broken files reported again")
			}
			os.WriteFile(files.Cert, good, 0o644)
			os.WriteFile(files.Key, goodKey, 0o600)
			// Rewritten in place, the good files may keep their inode,
			// size and, on a coarse clock, time: a fresh rename does not.
			touch(t, files.Cert)
			if _, _, err := rel.Refresh(); err != nil {
				t.Fatalf("good files again: %v", err)
			}
		})
	}

	// The pool of client CAs follows ca.crt: a bundle of the federation CA
	// and a new one lets a site of the new CA in.
	bOut := filepath.Join(t.TempDir(), "b")
	if _, err := certs.Issue(otherCA, bOut, req("site-b")); err != nil {
		t.Fatal(err)
	}
	idB, err := certs.Load(certs.FilesIn(bOut, "site-b"))
	if err != nil {
		t.Fatal(err)
	}
	clientB := idB.ClientConfig("127.0.0.1")
	clientB.RootCAs = plain.RootCAs
	if _, serr, _ := handshake(t, server, clientB); serr == nil {
		t.Fatal("a site of another CA was let in before ca.crt named it")
	}
	fed, _ := os.ReadFile(files.CA)
	other, _ := os.ReadFile(filepath.Join(otherCA, certs.CACertFile))
	replace(t, files.CA, append(fed, other...))
	if name, serr, cerr := handshake(t, server, clientB); serr != nil || cerr != nil || name != "site-b" {
		t.Errorf("site of the CA added to ca.crt: server sees %q, errors %v / %v", name, serr, cerr)
	}
}

// TestReloaderClient renews a site's certificate under a client
// configuration built by Reloader, which presents the new one at the next
// handshake, and checks Watch.
func TestReloaderClient(t *testing.T) {
	caDir := newCA(t)
	dir := t.TempDir()
	for _, n := range []string{"coordinator", "site-a"} {
		if _, err := certs.Issue(caDir, dir, req(n)); err != nil {
			t.Fatal(err)
		}
	}
	var rep reports
	rel, err := certs.NewReloader(certs.FilesIn(dir, "site-a"), rep.report)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := certs.ServerConfig(certs.FilesIn(dir, "coordinator"))
	if err != nil {
		t.Fatal(err)
	}
	server, seen := serialSeen(plain)
	client := rel.ClientConfig("127.0.0.1")
	for i := range 2 {
		want := serialOf(t, filepath.Join(dir, "site-a.crt"))
		name, serr, cerr := handshake(t, server, client)
		if serr != nil || cerr != nil || name != "site-a" {
			t.Fatalf("handshake %d: server sees %q, errors %v / %v", i, name, serr, cerr)
		}
		if got := seen(); got.Cmp(want) != 0 {
			t.Errorf("handshake %d: site presented serial %v, want %v", i, got, want)
		}
		if _, err := certs.Renew(caDir, dir, certs.Request{Name: "site-a"}); err != nil {
			t.Fatal(err)
		}
	}
	// Watch notices the last renewal without a handshake.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rel.Watch(ctx, 10*time.Millisecond); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for rep.count() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if rep.count() != 2 || rep.last(t) != nil {
		t.Errorf("Watch: %d reports, last %v", rep.count(), rep.last(t))
	}
	if _, err := certs.NewReloader(certs.FilesIn(dir, "absent"), nil); err == nil {
		t.Error("NewReloader of missing files succeeded")
	}
}

// touch replaces path with a copy of itself, as a rename does.
func touch(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	replace(t, path, b)
}

// replace writes data to path through a rename.
func replace(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestRenew checks Renew's files and errors.
func TestRenew(t *testing.T) {
	caDir := newCA(t)
	out := filepath.Join(t.TempDir(), "a")
	first, err := certs.Issue(caDir, out, certs.Request{Name: "coordinator", Role: certs.RoleCoordinator, Hosts: []string{"a.example.org", "10.1.2.3"}})
	if err != nil {
		t.Fatal(err)
	}
	is, err := certs.Renew(caDir, out, certs.Request{Name: "coordinator"})
	if err != nil {
		t.Fatal(err)
	}
	c := is.Certificate
	if c.SerialNumber.Cmp(first.Certificate.SerialNumber) == 0 || len(c.DNSNames) != 1 || len(c.IPAddresses) != 1 {
		t.Errorf("renewed: serial %v (was %v), hosts %v %v", c.SerialNumber, first.Certificate.SerialNumber, c.DNSNames, c.IPAddresses)
	}
	if m := mode(t, is.KeyFile); m != 0o600 {
		t.Errorf("renewed key mode %v, want 0600", m)
	}
	if m := mode(t, is.CertFile); m != 0o644 {
		t.Errorf("renewed certificate mode %v, want 0644", m)
	}
	if id, err := certs.Load(certs.FilesIn(out, "coordinator")); err != nil || !id.Leaf.Equal(c) || id.Role != certs.RoleCoordinator {
		t.Errorf("Load after Renew: %v", err)
	}

	// A key path that cannot be replaced leaves the certificate alone and
	// no temporary file behind.
	blocked := filepath.Join(t.TempDir(), "b")
	if _, err := certs.Issue(caDir, blocked, req("site-b")); err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(blocked, "site-b.key")
	os.Remove(keyPath)
	if err := os.MkdirAll(filepath.Join(keyPath, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(blocked, "site-b.crt"))
	if _, err := certs.Renew(caDir, blocked, certs.Request{Name: "site-b"}); err == nil || !strings.Contains(err.Error(), "replace "+keyPath) {
		t.Errorf("Renew over a folder: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(blocked, "site-b.crt")); string(after) != string(before) {
		t.Error("a failed Renew replaced the certificate")
	}
	if left, _ := filepath.Glob(filepath.Join(blocked, ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}

	if _, err := certs.Issue(caDir, out, req("site-a")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, caDir, out string
		role             certs.Role
		hosts            []string
		want             error
		msg              string
	}{
		{"site-a", t.TempDir(), out, 0, nil, os.ErrNotExist, "read certificate"},
		{"site-c", caDir, out, 0, nil, certs.ErrNotIssued, "site-c.crt does not exist"},
		{"ca", caDir, out, 0, nil, certs.ErrName, "reserved"},
		{"Site A", caDir, out, 0, nil, certs.ErrName, "not allowed"},
		{"coordinator", caDir, out, 0, []string{""}, certs.ErrInvalid, "empty host"},
		{"site-a", caDir, out, 0, []string{"a.example.org"}, certs.ErrInvalid, "names no host"},
		{"site-a", newCA(t), out, 0, nil, certs.ErrExists, "another CA certificate"},
	} {
		if _, err := certs.Renew(tc.caDir, tc.out, certs.Request{Name: tc.name, Role: tc.role, Hosts: tc.hosts}); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Renew(%q): %v, want %v containing %q", tc.name, err, tc.want, tc.msg)
		}
	}
	// A site renewed as the coordinator needs hosts; with them it is one,
	// valid for them.
	if _, err := certs.Renew(caDir, out, certs.Request{Name: "site-a", Role: certs.RoleCoordinator}); !errors.Is(err, certs.ErrInvalid) || !strings.Contains(err.Error(), "needs the host") {
		t.Errorf("Renew of a site as coordinator without hosts: %v", err)
	}
	if is, err := certs.Renew(caDir, out, certs.Request{Name: "site-a", Role: certs.RoleCoordinator, Hosts: []string{"10.9.8.7"}}); err != nil ||
		certs.RoleOf(is.Certificate) != certs.RoleCoordinator || !slices.Equal(certs.Hosts(is.Certificate), []string{"10.9.8.7"}) {
		t.Errorf("Renew of a site as coordinator at 10.9.8.7: %v", err)
	}
	// A certificate file that holds no certificate is not renewed.
	os.WriteFile(filepath.Join(out, "site-a.crt"), []byte("junk"), 0o644)
	if _, err := certs.Renew(caDir, out, certs.Request{Name: "site-a"}); !errors.Is(err, certs.ErrInvalid) {
		t.Errorf("Renew of junk: %v", err)
	}
}
