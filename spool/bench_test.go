package spool

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
)

// BenchmarkReadRows reads a training batch, 4096 rows drawn at random
// and sorted, from a spool of 1 000 000 rows of 32 values (256 MB, the
// paper's design: w, y and 30 covariates), as the page cache serves it
// once the file was read; and the same rows as one range, for the cost of
// the positioned reads themselves.
func BenchmarkReadRows(b *testing.B) {
	const rows, cols, batch = 1000000, 32, 4096
	path := filepath.Join(b.TempDir(), "big.spool")
	w, err := Create(path, cols)
	if err != nil {
		b.Fatal(err)
	}
	row := make([]float64, cols)
	for i := range rows {
		row[0] = float64(i)
		if err := w.Append(row); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	dst := make([]float64, batch*cols)
	r := rand.New(rand.NewPCG(1, 2))
	b.Run("batch", func(b *testing.B) {
		idx := make([]int, batch)
		for range b.N {
			for k := range idx {
				idx[k] = r.IntN(rows)
			}
			slices.Sort(idx)
			idx = slices.Compact(idx)
			if err := f.ReadRows(idx, dst[:len(idx)*cols]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/row")
	})
	b.Run("range", func(b *testing.B) {
		for range b.N {
			lo := r.IntN(rows - batch)
			if err := f.ReadRange(lo, lo+batch, dst); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/row")
	})
}
