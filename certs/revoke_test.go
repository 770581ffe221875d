package certs_test

import (
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crffd/crffd/certs"
)

// copyFile copies src to dst, replacing dst by a rename as an operator's
// tools would.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	replace(t, dst, b)
}

// A site's certificate cannot serve TLS: a site that stole no key but
// holds its own certificate cannot stand in for the coordinator.
func TestSiteCertificateCannotServe(t *testing.T) {
	caDir := newCA(t)
	dir := t.TempDir()
	for _, n := range []string{"site-a", "site-b"} {
		if _, err := certs.Issue(caDir, dir, req(n)); err != nil {
			t.Fatal(err)
		}
	}
	id, err := certs.Load(certs.FilesIn(dir, "site-a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := id.Can(certs.RoleCoordinator); !errors.Is(err, certs.ErrInvalid) || !strings.Contains(err.Error(), "site certificate") {
		t.Errorf("Can(coordinator) of a site: %v", err)
	}
	if err := id.Can(certs.RoleSite); err != nil {
		t.Errorf("Can(site) of a site: %v", err)
	}
	client, err := certs.ClientConfig(certs.FilesIn(dir, "site-b"), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, cerr := handshake(t, id.ServerConfig(), client); cerr == nil {
		t.Error("a site certificate served TLS to another site")
	}
	// Host names aside, the certificate is not for server authentication.
	var inv x509.CertificateInvalidError
	if _, err := id.Leaf.Verify(x509.VerifyOptions{Roots: id.Pool}); !errors.As(err, &inv) || inv.Reason != x509.IncompatibleUsage {
		t.Errorf("verifying a site certificate as a server's: %v, want incompatible usage", err)
	}
}

func TestRevoke(t *testing.T) {
	caDir := newCA(t)
	dir := t.TempDir() // the daemons' folder: their certificates, ca.crt and later ca.crl
	for _, n := range []string{"coordinator", "site-a", "site-b"} {
		if _, err := certs.Issue(caDir, dir, req(n)); err != nil {
			t.Fatal(err)
		}
	}
	rel, err := certs.NewReloader(certs.FilesIn(dir, "coordinator"), nil)
	if err != nil {
		t.Fatal(err)
	}
	server := rel.ServerConfig()
	clientOf := func(name string) *certs.Reloader {
		t.Helper()
		r, err := certs.NewReloader(certs.FilesIn(dir, name), nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	siteA, siteB := clientOf("site-a"), clientOf("site-b")
	if name, serr, cerr := handshake(t, server, siteA.ClientConfig("127.0.0.1")); serr != nil || cerr != nil || name != "site-a" {
		t.Fatalf("before revocation: %q %v %v", name, serr, cerr)
	}

	rev, err := certs.Revoke(caDir, "site-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if rev.File != filepath.Join(caDir, certs.CRLFile) || len(rev.Serials) != 1 || rev.Entries != 1 {
		t.Errorf("Revoke: %+v", rev)
	}
	// Until the list reaches the daemons nothing changes; once copied, the
	// running coordinator refuses site-a and keeps site-b.
	copyFile(t, rev.File, filepath.Join(dir, certs.CRLFile))
	if _, serr, _ := handshake(t, server, siteA.ClientConfig("127.0.0.1")); !errors.Is(serr, certs.ErrRevoked) {
		t.Errorf("revoked site-a: server error %v, want ErrRevoked", serr)
	}
	if name, serr, cerr := handshake(t, server, siteB.ClientConfig("127.0.0.1")); serr != nil || cerr != nil || name != "site-b" {
		t.Errorf("site-b after site-a's revocation: %q %v %v", name, serr, cerr)
	}
	// site-a's own daemon will not start on the revoked certificate.
	if _, err := certs.Load(certs.FilesIn(dir, "site-a")); !errors.Is(err, certs.ErrRevoked) || !strings.Contains(err.Error(), "renew it") {
		t.Errorf("Load of a revoked certificate: %v", err)
	}
	// A renewed certificate is a new one, and valid.
	if _, err := certs.Renew(caDir, dir, certs.Request{Name: "site-a"}); err != nil {
		t.Fatal(err)
	}
	if name, serr, cerr := handshake(t, server, siteA.ClientConfig("127.0.0.1")); serr != nil || cerr != nil || name != "site-a" {
		t.Errorf("renewed site-a: %q %v %v", name, serr, cerr)
	}

	// Revoking the coordinator: sites refuse it (the running coordinator
	// keeps presenting it), and the list keeps site-a's old certificate. Revoking site-a again revokes its renewed one too.
	rev, err = certs.Revoke(caDir, "coordinator", nil)
	if err != nil || rev.Entries != 2 {
		t.Fatalf("Revoke coordinator: %+v, %v", rev, err)
	}
	copyFile(t, rev.File, filepath.Join(dir, certs.CRLFile))
	if _, _, cerr := handshake(t, server, siteB.ClientConfig("127.0.0.1")); !errors.Is(cerr, certs.ErrRevoked) {
		t.Errorf("site-b dialling a revoked coordinator: %v, want ErrRevoked", cerr)
	}
	if rev, err = certs.Revoke(caDir, "site-a", nil); err != nil || len(rev.Serials) != 2 || rev.Entries != 3 {
		t.Errorf("second Revoke of site-a: %+v, %v", rev, err)
	}

	other := newCA(t)
	oDir := t.TempDir()
	if _, err := certs.Issue(other, oDir, req("site-a")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		caDir, name string
		files       []string
		want        error
		msg         string
	}{
		{caDir, "site-z", nil, certs.ErrNotIssued, "no certificate"},
		{caDir, "site", nil, certs.ErrNotIssued, "no certificate"}, // a prefix of site-a is not site-a
		{caDir, "Site A", nil, certs.ErrName, "not allowed"},
		{caDir, "site-a", []string{filepath.Join(oDir, "site-a.crt")}, certs.ErrInvalid, "not issued by the CA"},
		{caDir, "site-b", []string{filepath.Join(dir, "coordinator.crt")}, certs.ErrName, `names "coordinator"`},
		{t.TempDir(), "site-a", nil, os.ErrNotExist, "read certificate"},
	} {
		if _, err := certs.Revoke(tc.caDir, tc.name, tc.files); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Revoke(%q, %v): %v, want %v containing %q", tc.name, tc.files, err, tc.want, tc.msg)
		}
	}

	// A list the federation CA did not sign is refused.
	if _, err := certs.Revoke(other, "site-a", nil); err != nil {
		t.Fatal(err)
	}
	copyFile(t, filepath.Join(other, certs.CRLFile), filepath.Join(dir, certs.CRLFile))
	if _, err := certs.Load(certs.FilesIn(dir, "site-b")); !errors.Is(err, certs.ErrInvalid) || !strings.Contains(err.Error(), "not signed by the federation CA") {
		t.Errorf("Load with another CA's list: %v", err)
	}
	os.WriteFile(filepath.Join(dir, certs.CRLFile), []byte("junk"), 0o644)
	if _, err := certs.Load(certs.FilesIn(dir, "site-b")); !errors.Is(err, certs.ErrInvalid) || !strings.Contains(err.Error(), "no PEM revocation list") {
		t.Errorf("Load with a junk list: %v", err)
	}
}
