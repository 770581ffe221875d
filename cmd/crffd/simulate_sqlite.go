package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/crffd/crffd/dataset"
	"github.com/crffd/crffd/store"
)

// Tables that crffd simulate writes into each site file. The records table
// is what a site's configuration points at; the truth table holds the
// simulated ground truth, for checking estimates, and is never read by
// training.
const (
	simRecordsTable = "records"
	simTruthTable   = "truth"
)

// writeSiteFile writes one source as a site file: the records (id, w, y,
// x1..xd) and the truth (id, mu0, mu1, y_cfactual). An existing file is
// refused rather than mixed with new data.
func writeSiteFile(ctx context.Context, path string, t *dataset.Table) error {
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("simulate: %s already exists; choose an empty --out directory", path)
	}
	site, err := store.Open(ctx, path, store.Options{Create: true})
	if err != nil {
		return err
	}
	defer site.Close()
	n, dx := t.X.Dims()
	cols := []store.Column{{Name: "id", Type: store.Integer}, {Name: "w", Type: store.Integer}, {Name: "y", Type: store.Real}}
	for j := 1; j <= dx; j++ {
		cols = append(cols, store.Column{Name: fmt.Sprintf("x%d", j), Type: store.Real})
	}
	rows := make([][]any, n)
	truth := make([][]any, n)
	for i := range rows {
		r := make([]any, 0, len(cols))
		r = append(r, int64(i+1), int64(t.W[i]), t.Y[i])
		for _, v := range t.X.RawRowView(i) {
			r = append(r, v)
		}
		rows[i] = r
		truth[i] = []any{int64(i + 1), t.Mu0[i], t.Mu1[i], t.YCF[i]}
	}
	if err := site.CreateTable(ctx, simRecordsTable, cols, rows, false); err != nil {
		return err
	}
	truthCols := []store.Column{{Name: "id", Type: store.Integer}, {Name: "mu0", Type: store.Real}, {Name: "mu1", Type: store.Real}, {Name: "y_cfactual", Type: store.Real}}
	return site.CreateTable(ctx, simTruthTable, truthCols, truth, false)
}

// siteConfig is the ready single-site configuration written beside a
// simulated site file. Paths in a configuration are relative to the file.
func siteConfig(name, dbFile string, binary bool) string {
	outcome := "continuous"
	if binary {
		outcome = "binary"
	}
	return fmt.Sprintf(`# Site %[1]s, written by crffd simulate. Fit it alone with:
#   crffd fit --config %[1]s.yaml
site:
  name: %[1]s
  db: %[2]s
  table: %[3]s
  id_column: id
  treatment_column: w
  outcome_column: y
  outcome_type: %[4]s
  on_invalid: refuse
kernel:
  name: gaussian
`, name, dbFile, simRecordsTable, outcome)
}

// writeSiteFiles writes siteK.sqlite and siteK.yaml for every source.
func writeSiteFiles(ctx context.Context, dir string, tables []*dataset.Table, binary bool) ([]string, error) {
	var paths []string
	for k, t := range tables {
		name := fmt.Sprintf("site%d", k+1)
		db := filepath.Join(dir, name+".sqlite")
		if err := writeSiteFile(ctx, db, t); err != nil {
			return nil, err
		}
		cfg := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(cfg, []byte(siteConfig(name, name+".sqlite", binary)), 0o644); err != nil {
			return nil, fmt.Errorf("simulate: write %s: %w", cfg, err)
		}
		paths = append(paths, db, cfg)
	}
	return paths, nil
}
