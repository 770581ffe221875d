package certs_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/certs"
)

// craft signs a certificate from tmpl with the CA in caDir, for the cases
// Issue never makes.
func craft(t *testing.T, caDir string, tmpl *x509.Certificate) *x509.Certificate {
	t.Helper()
	ca, err := tls.LoadX509KeyPair(filepath.Join(caDir, certs.CACertFile), filepath.Join(caDir, certs.CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, ca.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAuthenticate(t *testing.T) {
	caDir := newCA(t)
	dir := t.TempDir()
	issued := map[string]*x509.Certificate{}
	for _, n := range []string{"coordinator", "site-a", "site-b"} {
		is, err := certs.Issue(caDir, dir, req(n))
		if err != nil {
			t.Fatal(err)
		}
		issued[n] = is.Certificate
	}
	other := newCA(t)
	stranger, err := certs.Issue(other, t.TempDir(), req("site-a"))
	if err != nil {
		t.Fatal(err)
	}
	both := craft(t, caDir, &x509.Certificate{Subject: pkix.Name{CommonName: "site-old"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
	noUsage := craft(t, caDir, &x509.Certificate{Subject: pkix.Name{CommonName: "site-c"}})
	badName := craft(t, caDir, &x509.Certificate{Subject: pkix.Name{CommonName: "Site C"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if _, err := certs.Revoke(caDir, "site-b", nil); err != nil {
		t.Fatal(err)
	}
	copyFile(t, filepath.Join(caDir, certs.CRLFile), filepath.Join(dir, certs.CRLFile))
	id, err := certs.Load(certs.FilesIn(dir, "coordinator"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, tc := range []struct {
		name string
		cert *x509.Certificate
		role certs.Role
		when time.Time
		want string // the name, or what the error says
		err  error
	}{
		{"site", issued["site-a"], certs.RoleSite, now, "site-a", nil},
		{"coordinator", issued["coordinator"], certs.RoleCoordinator, now, "coordinator", nil},
		{"both roles as site", both, certs.RoleSite, now, "site-old", nil},
		{"both roles as coordinator", both, certs.RoleCoordinator, now, "site-old", nil},
		{"site as coordinator", issued["site-a"], certs.RoleCoordinator, now, "a site certificate, not a coordinator's", certs.ErrInvalid},
		{"coordinator as site", issued["coordinator"], certs.RoleSite, now, "a coordinator certificate, not a site's", certs.ErrInvalid},
		{"no usage", noUsage, certs.RoleSite, now, "neither TLS server nor client", certs.ErrInvalid},
		{"other CA", stranger.Certificate, certs.RoleSite, now, "not issued by the federation CA", certs.ErrInvalid},
		{"expired", issued["site-a"], certs.RoleSite, now.Add(certs.CertValidity + time.Hour), "expired", certs.ErrInvalid},
		{"not yet valid", issued["site-a"], certs.RoleSite, now.Add(-2 * time.Hour), "expired or is not yet valid", certs.ErrInvalid},
		{"revoked", issued["site-b"], certs.RoleSite, now, "revocation list", certs.ErrRevoked},
		{"bad name", badName, certs.RoleSite, now, `"Site C"`, certs.ErrName},
		{"no certificate", nil, certs.RoleSite, now, "no certificate", certs.ErrInvalid},
		{"no role", issued["site-a"], 0, now, "want site or coordinator", certs.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := id.Authenticate(tc.cert, tc.role, tc.when)
			if tc.err == nil {
				if err != nil || got != tc.want {
					t.Errorf("Authenticate = %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Authenticate = %q, %v; want %v containing %q", got, err, tc.err, tc.want)
			}
		})
	}
}
