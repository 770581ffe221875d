package certs_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/certs"
	"github.com/crffd/crffd/ident"
)

// newCA makes a CA in a fresh folder and returns the folder.
func newCA(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ca")
	if _, err := certs.InitCA(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// req is the request of a test daemon: the coordinator's, valid for
// 127.0.0.1, or a site's.
func req(name string) certs.Request {
	if name == "coordinator" {
		return certs.Request{Name: name, Role: certs.RoleCoordinator, Hosts: []string{"127.0.0.1"}}
	}
	return certs.Request{Name: name, Role: certs.RoleSite}
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestInitCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	ca, err := certs.InitCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := ca.Certificate
	if !c.IsCA || c.KeyUsage&x509.KeyUsageCertSign == 0 || time.Until(c.NotAfter) < 9*365*24*time.Hour {
		t.Errorf("CA certificate: IsCA=%v usage=%v until %v", c.IsCA, c.KeyUsage, c.NotAfter)
	}
	if m := mode(t, ca.KeyFile); m != 0o600 {
		t.Errorf("ca.key mode %v, want 0600", m)
	}
	if m := mode(t, dir); m != 0o700 {
		t.Errorf("CA folder mode %v, want 0700", m)
	}
	before, _ := os.ReadFile(ca.KeyFile)
	if _, err := certs.InitCA(dir); !errors.Is(err, certs.ErrExists) || !strings.Contains(err.Error(), "ca.crt") {
		t.Errorf("second InitCA: %v, want ErrExists naming ca.crt", err)
	}
	if after, _ := os.ReadFile(ca.KeyFile); string(after) != string(before) {
		t.Error("second InitCA changed ca.key")
	}
	// A lone ca.key is not overwritten either.
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, certs.CAKeyFile), []byte("x"), 0o600)
	if _, err := certs.InitCA(other); !errors.Is(err, certs.ErrExists) || !strings.Contains(err.Error(), "ca.key") {
		t.Errorf("InitCA over ca.key: %v", err)
	}
	if _, err := os.Stat(filepath.Join(other, certs.CACertFile)); err == nil {
		t.Error("InitCA wrote ca.crt beside an existing ca.key")
	}
}

func TestIssue(t *testing.T) {
	caDir := newCA(t)
	out := filepath.Join(t.TempDir(), "coord")
	is, err := certs.Issue(caDir, out, certs.Request{Name: "coordinator", Role: certs.RoleCoordinator, Hosts: []string{"127.0.0.1", "localhost", "::1"}})
	if err != nil {
		t.Fatal(err)
	}
	c := is.Certificate
	if c.Subject.CommonName != "coordinator" || len(c.IPAddresses) != 2 || len(c.DNSNames) != 1 || c.DNSNames[0] != "localhost" {
		t.Errorf("certificate CN %q IPs %v DNS %v", c.Subject.CommonName, c.IPAddresses, c.DNSNames)
	}
	if !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) || c.IsCA {
		t.Errorf("coordinator: ExtKeyUsage %v IsCA %v, want server authentication only", c.ExtKeyUsage, c.IsCA)
	}
	if life := c.NotAfter.Sub(c.NotBefore); life > certs.CertValidity+2*time.Hour || certs.CertValidity > 90*24*time.Hour {
		t.Errorf("coordinator valid for %v; the default is %v, want at most 90 days", life, certs.CertValidity)
	}
	if m := mode(t, is.KeyFile); m != 0o600 {
		t.Errorf("key mode %v, want 0600", m)
	}
	f := certs.FilesIn(out, "coordinator")
	if f.Cert != is.CertFile || f.Key != is.KeyFile {
		t.Errorf("FilesIn = %+v, Issue wrote %s and %s", f, is.CertFile, is.KeyFile)
	}
	id, err := certs.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	if id.Name != "coordinator" {
		t.Errorf("Load name %q", id.Name)
	}
	// A second certificate into the same folder reuses its ca.crt. A
	// site's authenticates a client only and names no host.
	site, err := certs.Issue(caDir, out, req("site-a"))
	if err != nil {
		t.Fatalf("second name into the same folder: %v", err)
	}
	if c := site.Certificate; !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) || len(c.DNSNames)+len(c.IPAddresses) != 0 {
		t.Errorf("site: ExtKeyUsage %v, hosts %v %v; want client authentication only and no host", c.ExtKeyUsage, c.DNSNames, c.IPAddresses)
	}
	// Into the CA's own folder too, with a lifetime of its own.
	week, err := certs.Issue(caDir, caDir, certs.Request{Name: "site-b", Role: certs.RoleSite, Validity: 7 * 24 * time.Hour})
	if err != nil {
		t.Errorf("into the CA folder: %v", err)
	} else if life := week.Certificate.NotAfter.Sub(week.Certificate.NotBefore); life != 7*24*time.Hour+time.Hour {
		t.Errorf("asked for 7 days: valid for %v (with an hour of clock skew)", life)
	}
	for _, tc := range []struct {
		caDir, out string
		req        certs.Request
		want       error
		msg        string
	}{
		{caDir, out, req("coordinator"), certs.ErrExists, "coordinator.crt"},
		{caDir, t.TempDir(), req("ca"), certs.ErrName, "reserved"},
		{caDir, t.TempDir(), req("Site A"), ident.ErrName, "not allowed"},
		{caDir, t.TempDir(), req(""), certs.ErrName, "empty"},
		{caDir, t.TempDir(), certs.Request{Name: "coord", Role: certs.RoleCoordinator, Hosts: []string{""}}, certs.ErrInvalid, "empty host"},
		{caDir, t.TempDir(), certs.Request{Name: "coord", Role: certs.RoleCoordinator}, certs.ErrInvalid, "needs the host names"},
		{caDir, t.TempDir(), certs.Request{Name: "site-c", Role: certs.RoleSite, Hosts: []string{"localhost"}}, certs.ErrInvalid, "names no host"},
		{caDir, t.TempDir(), certs.Request{Name: "site-c"}, certs.ErrInvalid, "want site or coordinator"},
		{caDir, t.TempDir(), certs.Request{Name: "site-c", Role: certs.RoleSite, Validity: -time.Hour}, certs.ErrInvalid, "positive"},
		{newCA(t), out, req("site-c"), certs.ErrExists, "another CA certificate"},
		{t.TempDir(), t.TempDir(), req("site-c"), os.ErrNotExist, "read certificate"},
	} {
		if _, err := certs.Issue(tc.caDir, tc.out, tc.req); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Issue(%+v): %v, want %v containing %q", tc.req, err, tc.want, tc.msg)
		}
	}
}

func TestLoadRejects(t *testing.T) {
	caDir, evilDir := newCA(t), newCA(t)
	out := t.TempDir()
	if _, err := certs.Issue(evilDir, out, req("site-x")); err != nil {
		t.Fatal(err)
	}
	// site-x's folder holds the evil CA; point it at the real one.
	f := certs.FilesIn(out, "site-x")
	f.CA = filepath.Join(caDir, certs.CACertFile)
	if _, err := certs.Load(f); !errors.Is(err, certs.ErrInvalid) || !strings.Contains(err.Error(), "not issued by the federation CA") {
		t.Errorf("Load with another CA: %v", err)
	}
	f = certs.FilesIn(out, "site-x")
	f.Key = filepath.Join(evilDir, certs.CAKeyFile)
	if _, err := certs.Load(f); !errors.Is(err, certs.ErrInvalid) {
		t.Errorf("Load with a key of another certificate: %v", err)
	}
	if _, err := certs.ServerConfig(certs.FilesIn(out, "absent")); err == nil {
		t.Error("ServerConfig with missing files succeeded")
	}
}

// handshake runs a TLS handshake between a coordinator and a site over
// loopback and returns the name each side sees and each side's error.
func handshake(t *testing.T, server, client *tls.Config) (serverSees string, serverErr, clientErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		if err != nil {
			serverErr = err
			return
		}
		defer conn.Close()
		tc := tls.Server(conn, server)
		if serverErr = tc.HandshakeContext(context.Background()); serverErr == nil {
			serverSees, serverErr = certs.PeerName(tc.ConnectionState())
			tc.Write([]byte("ok"))
		}
	}()
	conn, err := tls.Dial("tcp", ln.Addr().String(), client)
	if err == nil {
		buf := make([]byte, 2)
		_, err = conn.Read(buf) // in TLS 1.3 the server's verdict arrives after the client's handshake
		conn.Close()
	}
	<-done
	return serverSees, serverErr, err
}

func TestMutualTLS(t *testing.T) {
	caDir, evilDir := newCA(t), newCA(t)
	dir := t.TempDir()
	for _, n := range []string{"coordinator", "site-a"} {
		if _, err := certs.Issue(caDir, dir, req(n)); err != nil {
			t.Fatal(err)
		}
	}
	evil := t.TempDir()
	if _, err := certs.Issue(evilDir, evil, req("site-a")); err != nil {
		t.Fatal(err)
	}
	server, err := certs.ServerConfig(certs.FilesIn(dir, "coordinator"))
	if err != nil {
		t.Fatal(err)
	}
	if server.MinVersion != tls.VersionTLS13 || server.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Errorf("server config: version %x, client auth %v", server.MinVersion, server.ClientAuth)
	}
	client, err := certs.ClientConfig(certs.FilesIn(dir, "site-a"), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	name, serr, cerr := handshake(t, server, client)
	if serr != nil || cerr != nil || name != "site-a" {
		t.Fatalf("good site: server sees %q, errors %v / %v", name, serr, cerr)
	}

	// A certificate of another CA, presented with the real CA as roots so
	// that the client itself trusts the coordinator.
	id, err := certs.Load(certs.FilesIn(evil, "site-a"))
	if err != nil {
		t.Fatal(err)
	}
	bad := id.ClientConfig("127.0.0.1")
	bad.RootCAs = server.ClientCAs
	_, serr, cerr = handshake(t, server, bad)
	if serr == nil || !strings.Contains(serr.Error(), "unknown authority") || cerr == nil {
		t.Errorf("site of another CA: server error %v, client error %v", serr, cerr)
	}

	// No client certificate at all.
	anon := client.Clone()
	anon.Certificates = nil
	if _, serr, _ = handshake(t, server, anon); serr == nil {
		t.Error("a client without a certificate was accepted")
	}
	if _, err := certs.PeerName(tls.ConnectionState{}); !errors.Is(err, certs.ErrInvalid) {
		t.Errorf("PeerName without a chain: %v", err)
	}
}
