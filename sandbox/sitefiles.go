// Package sandbox writes simulated sites and a federation of them on
// loopback, ready to run: a site file per source of package synth's
// designs (its records, and the simulated truth beside them), each with a
// single-site configuration, and on request a federation CA with
// certificates, the coordinator's configuration and a federation section
// in every site's. Simulate writes the replicates of a design, as IHDP-
// layout CSV files or as site files.
//
// Nothing written is ever overwritten: a site file that exists is refused.
package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/crffd/crffd/dataset"
	"github.com/crffd/crffd/store"
	"github.com/crffd/crffd/synth"
)

// Tables written into each site file. The records table is what a site's
// configuration points at; the truth table holds the simulated ground
// truth (id, mu0, mu1, y_cfactual), for checking estimates, and is never
// read by training.
const (
	RecordsTable = "records"
	TruthTable   = "truth"
)

// writeSiteFile writes one source as a site file: the records (id, w, y,
// then the covariates, named by names, or x1..xd when names is nil) and the
// truth (id, mu0, mu1, y_cfactual). An existing file is refused rather than
// mixed with new data.
func writeSiteFile(ctx context.Context, path string, t *dataset.Table, names []string) error {
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("simulate: %s already exists; choose an empty --out directory", path)
	}
	if names != nil && len(names) != t.Covariates() {
		return fmt.Errorf("simulate: %s: %d covariate names for %d covariates", path, len(names), t.Covariates())
	}
	site, err := store.Open(ctx, path, store.Options{Create: true})
	if err != nil {
		return err
	}
	defer site.Close()
	n, dx := t.X.Dims()
	cols := []store.Column{{Name: "id", Type: store.Integer}, {Name: "w", Type: store.Integer}, {Name: "y", Type: store.Real}}
	for j := 1; j <= dx; j++ {
		name := fmt.Sprintf("x%d", j)
		if names != nil {
			name = names[j-1]
		}
		cols = append(cols, store.Column{Name: name, Type: store.Real})
	}
	// The rows are made one at a time as they are inserted: held at once
	// as boxed values, ten million of them took the simulator past 18 GB.
	err = site.CreateTableRows(ctx, RecordsTable, cols, n, func(i int, r []any) error {
		r[0], r[1], r[2] = int64(i+1), int64(t.W[i]), t.Y[i]
		for j, v := range t.X.RawRowView(i) {
			r[3+j] = v
		}
		return nil
	}, false)
	if err != nil {
		return err
	}
	truthCols := []store.Column{{Name: "id", Type: store.Integer}, {Name: "mu0", Type: store.Real}, {Name: "mu1", Type: store.Real}, {Name: "y_cfactual", Type: store.Real}}
	return site.CreateTableRows(ctx, TruthTable, truthCols, n, func(i int, r []any) error {
		r[0], r[1], r[2], r[3] = int64(i+1), t.Mu0[i], t.Mu1[i], t.YCF[i]
		return nil
	}, false)
}

// WriteSites writes siteK.sqlite and siteK.yaml into dir for every source
// of tables, with the covariates named by names (nil: x1..xd), the outcome
// declared binary or continuous, and the design's public column ranges as
// the privacy bounds (none when bounds is empty). It returns the paths
// written.
func WriteSites(ctx context.Context, dir string, tables []*dataset.Table, binary bool, names []string, bounds map[string]synth.Bound) ([]string, error) {
	var paths []string
	for k, t := range tables {
		name := fmt.Sprintf("site%d", k+1)
		db := filepath.Join(dir, name+".sqlite")
		if err := writeSiteFile(ctx, db, t, names); err != nil {
			return nil, err
		}
		cfg := filepath.Join(dir, name+".yaml")
		text, err := siteConfig(name, name+".sqlite", binary, bounds)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(cfg, text, 0o644); err != nil {
			return nil, fmt.Errorf("simulate: write %s: %w", cfg, err)
		}
		paths = append(paths, db, cfg)
	}
	return paths, nil
}
