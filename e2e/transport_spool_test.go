package e2e

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/certs"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/plugins/transport"
)

// TestTransportSpool runs a coordinator and a site as spool transport
// plugin processes sharing a temporary directory, signing their files with
// the federation's certificates: envelopes arrive in order both ways, and
// no file, partial or whole, is left behind. Without certificate files the
// plugin refuses to start unless told to run unsigned.
func TestTransportSpool(t *testing.T) {
	dir := t.TempDir()
	pki := federationPKI(t)
	opts := func() map[string]string { return map[string]string{"dir": dir, "poll": "10ms"} }
	config := func(name string, role transport.Role) transport.Config {
		return transport.Config{Name: name, Role: role, CoordinatorName: "coordinator", TLS: certs.FilesIn(pki, name), Options: opts()}
	}
	unsigned := config("site-b", transport.RoleSite)
	unsigned.TLS = certs.Files{}
	if _, _, err := openTransport(t, "spool", unsigned); !errors.Is(err, transport.ErrConfig) || !strings.Contains(err.Error(), "federation.tls.ca") {
		t.Errorf("spool without certificate files: %v, want ErrConfig naming federation.tls.ca", err)
	}
	coord, _ := mustOpenTransport(t, "spool", config("coordinator", transport.RoleCoordinator))
	site, _ := mustOpenTransport(t, "spool", config("site-a", transport.RoleSite))
	coordIn, siteIn := inbox(t, coord), inbox(t, site)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const rounds = 10
	for r := uint64(1); r <= rounds; r++ {
		if err := coord.Send(ctx, sealed(t, wire.KindWeights, r, "coordinator", "site-a", float64(r), 1)); err != nil {
			t.Fatal(err)
		}
	}
	for r := uint64(1); r <= rounds; r++ {
		e := nextEnvelope(t, siteIn)
		if e.Round != r || e.Tensors()[0].Values[0] != float64(r) {
			t.Fatalf("site received %v, want round %d", e, r)
		}
		if err := site.Send(ctx, sealed(t, wire.KindGradient, r, "site-a", "coordinator", -float64(r))); err != nil {
			t.Fatal(err)
		}
	}
	for r := uint64(1); r <= rounds; r++ {
		if e := nextEnvelope(t, coordIn); e.Round != r || e.Sender != "site-a" {
			t.Fatalf("coordinator received %v, want round %d from site-a", e, r)
		}
	}
	// Deleting after delivery may trail the delivery by a moment.
	var left []string
	ok := waitFor(5*time.Second, func() bool {
		left = left[:0]
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				left = append(left, p)
			}
			return nil
		})
		return len(left) == 0
	})
	if !ok {
		t.Errorf("files left in the spool: %s", strings.Join(left, " "))
	}
}
