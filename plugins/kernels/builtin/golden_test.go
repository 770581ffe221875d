package builtin

import (
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/crffd/crffd/plugins/kernels"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.json")

// TestGoldenFrequencies pins the frequencies of seed 1 bit for bit. Sites
// of one federation may run different builds of crffd; a change of sampler
// (ours or gonum's) would silently give them different features, so it
// must show up here first.
func TestGoldenFrequencies(t *testing.T) {
	got := map[string][]float64{}
	for _, k := range []kernels.Kernel{Gaussian{}, Laplacian{}, Matern{}} {
		m, err := k.Sample(2, 4, 1, kernels.Params{"nu": 2.5})
		if k.Info().Name != "matern" {
			m, err = k.Sample(2, 4, 1, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		got[k.Info().Name] = m.RawMatrix().Data
	}
	path := filepath.Join("testdata", "golden.json")
	if *update {
		b, _ := json.MarshalIndent(got, "", "  ")
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string][]float64
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for name, w := range want {
		g := got[name]
		if len(g) != len(w) {
			t.Fatalf("%s: %d values, golden has %d", name, len(g), len(w))
		}
		for i := range w {
			if math.Float64bits(g[i]) != math.Float64bits(w[i]) {
				t.Errorf("%s value %d: got %.17g, golden %.17g", name, i, g[i], w[i])
			}
		}
	}
}
