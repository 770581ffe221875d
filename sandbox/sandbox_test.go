package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/crffd/crffd/synth"
)

// TestWriteSitesAndFederation: the site files and configurations read
// back as written, the federation's names its sites in order, each site's
// federation section names the coordinator's address, and a second write
// into the same folder is refused rather than mixed with the first.
func TestWriteSitesAndFederation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	design := synth.Design{Sources: 2, Rows: 40, Seed: 3}
	tables, err := synth.Generate(design)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteSites(ctx, dir, tables, false, nil, design.Bounds()); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteFederation(dir, len(tables)); err != nil {
		t.Fatal(err)
	}
	type config struct {
		Site struct {
			Name, DB, Table string
		}
		Federation struct {
			Address, Secret string
			TLS             struct{ CA, Cert, Key string }
		}
		Coordinator struct{ Sites []string }
		Privacy     struct{ Bounds map[string][]float64 }
	}
	read := func(name string) config {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var c config
		if err := yaml.Unmarshal(b, &c); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return c
	}
	coord := read("coordinator.yaml")
	if !slices.Equal(coord.Coordinator.Sites, []string{"site1", "site2"}) || coord.Federation.Address == "" {
		t.Errorf("coordinator.yaml: %+v", coord)
	}
	for _, n := range []string{"site1", "site2"} {
		c := read(n + ".yaml")
		if c.Site.Name != n || c.Site.DB != n+".sqlite" || c.Site.Table != RecordsTable {
			t.Errorf("%s.yaml: site %+v", n, c.Site)
		}
		if c.Federation.Address != coord.Federation.Address || len(c.Federation.Secret) != 64 {
			t.Errorf("%s.yaml: federation %+v", n, c.Federation)
		}
		if _, err := os.Stat(filepath.Join(dir, c.Federation.TLS.Cert)); err != nil {
			t.Errorf("%s.yaml: %v", n, err)
		}
		if len(c.Privacy.Bounds["y"]) != 2 {
			t.Errorf("%s.yaml: privacy bounds %v", n, c.Privacy.Bounds)
		}
	}
	if _, err := WriteSites(ctx, dir, tables, false, nil, nil); err == nil {
		t.Error("a second WriteSites into the same folder: no error")
	}
}
