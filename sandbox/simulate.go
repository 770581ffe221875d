package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/crffd/crffd/dataset"
	"github.com/crffd/crffd/synth"
)

// Formats of Simulate.
const (
	CSV    = "csv"    // one IHDP-layout file per replicate, the sources as consecutive blocks
	SQLite = "sqlite" // one site file and configuration per source
)

// Simulation is what Simulate writes.
type Simulation struct {
	// Design is the design of the first replicate; replicate k has seed
	// Design.Seed+k-1 and Delta of Deltas, when set.
	Design     synth.Design
	Replicates int
	// Deltas, when set, returns the shifts of the replicate of seed.
	Deltas func(seed uint64) ([]float64, error)
	Format string // CSV or SQLite
	// Federation, with SQLite, also writes a federation of the sites
	// (WriteFederation).
	Federation bool
	Dir        string // created if missing
}

// Simulate writes the replicates of s into s.Dir and a line per file or
// replicate to w: its path and, for CSV, the design, its seed and the true
// ATE of the rows (not for the paper's design, whose truth is per row).
// SQLite writes one replicate.
func Simulate(ctx context.Context, s Simulation, w io.Writer) error {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	for r := 1; r <= s.Replicates; r++ {
		design := s.Design
		design.Seed += uint64(r - 1)
		if s.Deltas != nil {
			var err error
			if design.Delta, err = s.Deltas(design.Seed); err != nil {
				return err
			}
		}
		tables, err := synth.Generate(design)
		if err != nil {
			return err
		}
		if s.Format == SQLite {
			err = s.writeSites(ctx, design, tables, w)
		} else {
			err = writeCSV(filepath.Join(s.Dir, fmt.Sprintf("synth_%d.csv", r)), design, tables, w)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// writeSites writes tables, the replicate of design, as site files, with
// the federation of s.Federation, and their paths to w.
func (s Simulation) writeSites(ctx context.Context, design synth.Design, tables []*dataset.Table, w io.Writer) error {
	binary := design.BinaryOutcome || design.Name == synth.DesignBinary
	paths, err := WriteSites(ctx, s.Dir, tables, binary, design.Covariates(), design.Bounds())
	if err != nil {
		return err
	}
	if s.Federation {
		more, err := WriteFederation(s.Dir, len(tables))
		if err != nil {
			return err
		}
		paths = append(paths, more...)
	}
	for _, p := range paths {
		if _, err := fmt.Fprintln(w, p); err != nil {
			return err
		}
	}
	return nil
}

// writeCSV writes tables, the replicate of design, to path as one file,
// and a line saying so to w.
func writeCSV(path string, design synth.Design, tables []*dataset.Table, w io.Writer) error {
	all, err := dataset.Concat(tables...)
	if err != nil {
		return err
	}
	if err := dataset.WriteFile(path, all); err != nil {
		return err
	}
	if design.Name == synth.DesignPaper || design.Name == "" {
		_, err = fmt.Fprintf(w, "%s: %d sources × %d rows, seed %d\n", path, design.Sources, design.Rows, design.Seed)
		return err
	}
	var ate float64
	for _, tau := range all.Tau() {
		ate += tau
	}
	_, err = fmt.Fprintf(w, "%s: %d sources × %d rows, seed %d, design %s, true ATE of the rows %.4f\n",
		path, design.Sources, design.Rows, design.Seed, design.Name, ate/float64(all.Rows()))
	return err
}
