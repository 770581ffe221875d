package e2e

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/plugins/transport"
)

// TestTransportSpool runs a coordinator and a site as spool transport
// plugin processes sharing a temporary directory: envelopes arrive in
// order both ways, and no file, partial or whole, is left behind.
func TestTransportSpool(t *testing.T) {
	dir := t.TempDir()
	opts := func() map[string]string { return map[string]string{"dir": dir, "poll": "10ms"} }
	coord, _ := mustOpenTransport(t, "spool", transport.Config{Name: "coordinator", Role: transport.RoleCoordinator, Options: opts()})
	site, _ := mustOpenTransport(t, "spool", transport.Config{Name: "site-a", Role: transport.RoleSite, Options: opts()})
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
