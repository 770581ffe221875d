package grpcnet_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/certs"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/plugins/transport"
	"github.com/crffd/crffd/plugins/transport/grpcnet"
)

// serial returns the serial number, as the transports log it, of the
// certificate of name in dir.
func serial(t *testing.T, dir, name string) string {
	t.Helper()
	id, err := certs.Load(certs.FilesIn(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return `"serial":"` + id.Leaf.SerialNumber.Text(16) + `"`
}

// TestCertificateRenewal renews the certificates of a connected site and
// of the coordinator without restarting either transport: the site
// reconnects with its new certificate and goes on sending, the coordinator
// presents its new one to the next site that connects, and files that
// cannot be used are logged while the last good certificate stays.
func TestCertificateRenewal(t *testing.T) {
	grpcnet.SetCertCheckEvery(t, 20*time.Millisecond)
	p := newPKI(t)
	coord, coordLogs, addr := start(t, config("coordinator", transport.RoleCoordinator, "127.0.0.1:0", p.dir, nil))
	site, siteLogs, _ := start(t, config("site-a", transport.RoleSite, addr, p.dir, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, inSite := collect(t, coord), collect(t, site)
	if err := site.Send(ctx, env(t, wire.KindGradient, 1, "site-a", "coordinator", 1)); err != nil {
		t.Fatal(err)
	}
	next(t, in)
	waitLog(t, coordLogs, "site connected", serial(t, p.dir, "site-a"))

	if _, err := certs.Renew(p.dir, p.dir, certs.Request{Name: "site-a"}); err != nil {
		t.Fatal(err)
	}
	renewed := serial(t, p.dir, "site-a")
	waitLog(t, siteLogs, "certificate files changed: using the new certificate", renewed, "reconnecting to the coordinator with the renewed certificate")
	waitLog(t, coordLogs, renewed)
	if strings.Contains(siteLogs.String(), "connection to the coordinator ended") {
		t.Errorf("the reconnection to present the renewed certificate was logged as a lost connection:\n%s", siteLogs)
	}
	if err := site.Send(ctx, env(t, wire.KindGradient, 2, "site-a", "coordinator", 2)); err != nil {
		t.Fatalf("send after the renewal: %v", err)
	}
	if e := next(t, in); e.Round != 2 {
		t.Errorf("after the renewal the coordinator received round %d, want 2", e.Round)
	}

	// Garbage in place of the certificate is logged, and the connection
	// and the certificate stay.
	crt := filepath.Join(p.dir, "site-a.crt")
	if err := os.WriteFile(crt, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitLog(t, siteLogs, "certificate files changed but cannot be used", crt, "failed to find any PEM data")
	if err := coord.Send(ctx, env(t, wire.KindWeights, 3, "coordinator", "site-a", 3)); err != nil {
		t.Fatal(err)
	}
	if e := next(t, inSite); e.Round != 3 {
		t.Errorf("with broken files the site received round %d, want 3", e.Round)
	}

	// The coordinator presents its renewed certificate to the next site.
	if _, err := certs.Renew(p.dir, p.dir, certs.Request{Name: "coordinator"}); err != nil {
		t.Fatal(err)
	}
	waitLog(t, coordLogs, "certificate files changed: using the new certificate", serial(t, p.dir, "coordinator"))
	_, bLogs, _ := start(t, config("site-b", transport.RoleSite, addr, p.dir, nil))
	waitLog(t, bLogs, "connected to the coordinator", serial(t, p.dir, "coordinator"))
}

// TestRevocation revokes a connected site's certificate: once the list
// reaches the coordinator it closes the site's stream and refuses its
// handshakes, while another site goes on.
func TestRevocation(t *testing.T) {
	grpcnet.SetCertCheckEvery(t, 20*time.Millisecond)
	p := newPKI(t)
	coord, coordLogs, addr := start(t, config("coordinator", transport.RoleCoordinator, "127.0.0.1:0", p.dir, nil))
	// The sites read their revocation list from a folder of their own,
	// which the revocation leaves alone: a site that saw the list change
	// would reconnect on its own (site.renewed), and when it did so before
	// the coordinator's next check, no stream of site-a was left for the
	// coordinator to close, which is what this test is about.
	sites := t.TempDir()
	siteConfig := func(name string) transport.Config {
		cfg := config(name, transport.RoleSite, addr, p.dir, nil)
		cfg.TLS.CRL = filepath.Join(sites, certs.CRLFile)
		return cfg
	}
	siteA, _, _ := start(t, siteConfig("site-a"))
	siteB, _, _ := start(t, siteConfig("site-b"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in := collect(t, coord)
	for i, s := range []*grpcnet.Transport{siteA, siteB} {
		if err := s.Send(ctx, env(t, wire.KindGradient, 1, []string{"site-a", "site-b"}[i], "coordinator", 1)); err != nil {
			t.Fatal(err)
		}
		next(t, in)
	}
	// The CA's list is written in the CA folder, which here is also the
	// daemons' folder: FilesIn names its ca.crl.
	if _, err := certs.Revoke(p.dir, "site-a", nil); err != nil {
		t.Fatal(err)
	}
	waitLog(t, coordLogs, "closing the stream of a site whose certificate is revoked", `"peer":"site-a"`)
	// site-a comes back over its open connection (refused at Connect) or
	// over a new one (refused at the TLS handshake); either way refused.
	waitLog(t, coordLogs, `"msg":"refused a connection`, `"remote":"127.0.0.1:`, "certificate revoked")
	short, stop := context.WithTimeout(ctx, time.Second)
	defer stop()
	if err := siteA.Send(short, env(t, wire.KindGradient, 2, "site-a", "coordinator", 2)); !errors.Is(err, transport.ErrUnavailable) {
		t.Errorf("revoked site-a sent: %v", err)
	}
	if err := siteB.Send(ctx, env(t, wire.KindGradient, 2, "site-b", "coordinator", 2)); err != nil {
		t.Errorf("site-b after site-a's revocation: %v", err)
	}
	if e := next(t, in); e.Sender != "site-b" {
		t.Errorf("coordinator received %s's envelope", e.Sender)
	}
}
