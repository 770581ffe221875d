package records_test

import (
	"math"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/records"
)

func rows() *records.Data {
	return &records.Data{
		X: mat.NewDense(3, 2, []float64{1, 2, 3, 4, 1, 2}),
		W: []float64{0, 1, 0},
		Y: []float64{1, math.E, 1},
	}
}

// TestRowKeys: a row's key follows the row, not its position, the copies
// of a repeated row get keys of their own, and the key depends on the secret.
func TestRowKeys(t *testing.T) {
	d := rows()
	k := d.RowKeys([]byte("secret"))
	if k[0] == k[2] {
		t.Error("the two copies of row 0 share a key")
	}
	moved := d.Subset([]int{1, 0, 2}).RowKeys([]byte("secret"))
	if moved[0] != k[1] || moved[1] != k[0] || moved[2] != k[2] {
		t.Errorf("keys %x after moving the rows, want %x permuted", moved, k)
	}
	if other := d.RowKeys([]byte("other")); other[1] == k[1] {
		t.Error("the key of row 1 is the same under another secret")
	}
	if n := len((&records.Data{X: &mat.Dense{}}).RowKeys(nil)); n != 0 {
		t.Errorf("%d keys for no rows", n)
	}
}

func TestSubsetAppend(t *testing.T) {
	d := rows()
	s := d.Subset([]int{2, 1})
	if s.Rows() != 2 || !slices.Equal(s.W, []float64{0, 1}) || s.X.At(1, 0) != 3 {
		t.Errorf("Subset = %v %v", mat.Formatted(s.X), s.W)
	}
	a := s.Append(d)
	if a.Rows() != 5 || a.X.At(2, 0) != 1 || a.Y[3] != math.E {
		t.Errorf("Append = %v %v", mat.Formatted(a.X), a.Y)
	}
	if e := d.Subset(nil).Append(d.Subset(nil)); e.Rows() != 0 {
		t.Errorf("Append of no rows has %d", e.Rows())
	}
}

func TestMoments(t *testing.T) {
	m := rows().Moments()
	if m.N != 3 || !slices.Equal(m.Sum[:2], []float64{5, 8}) || math.Abs(m.Sum[2]-(2+math.E)) > 1e-15 || m.SumSq[0] != 11 {
		t.Errorf("Moments = %+v", m)
	}
	if m.Positive != 3 || m.LogSum != 1 || m.LogSumSq != 1 {
		t.Errorf("log moments %d %v %v, want 3 1 1", m.Positive, m.LogSum, m.LogSumSq)
	}
}

// TestAppendToNoRows: Data without rows (as Subset(nil) gives) takes the
// width of the rows appended to it.
func TestAppendToNoRows(t *testing.T) {
	d := rows()
	if a := d.Subset(nil).Append(d); a.Rows() != 3 || !mat.Equal(a.X, d.X) {
		t.Errorf("Append to no rows = %v", mat.Formatted(a.X))
	}
	if a := d.Append(d.Subset(nil)); a.Rows() != 3 || !mat.Equal(a.X, d.X) {
		t.Errorf("Append of no rows = %v", mat.Formatted(a.X))
	}
}

// TestMomentsInChunks: Moments added a chunk at a time, in row order, are
// those of all the rows at once, bit for bit, whatever the chunks.
func TestMomentsInChunks(t *testing.T) {
	const n = 1000
	d := &records.Data{X: mat.NewDense(n, 3, nil), W: make([]float64, n), Y: make([]float64, n)}
	for i := range n {
		for j := range 3 {
			d.X.Set(i, j, math.Sin(float64(i*3+j))*1e3+0.1)
		}
		d.Y[i] = math.Cos(float64(i)) * 7
	}
	whole := d.Moments()
	for _, chunk := range []int{1, 7, 256, n} {
		m := records.Moments{Sum: make([]float64, 4), SumSq: make([]float64, 4)}
		for lo := 0; lo < n; lo += chunk {
			m.Add(d.Subset(seq(lo, min(lo+chunk, n))))
		}
		if m.N != whole.N || !slices.Equal(m.Sum, whole.Sum) || !slices.Equal(m.SumSq, whole.SumSq) ||
			m.Positive != whole.Positive || m.LogSum != whole.LogSum || m.LogSumSq != whole.LogSumSq {
			t.Errorf("chunks of %d: %+v, want %+v", chunk, m, whole)
		}
	}
}

func seq(lo, hi int) []int {
	out := make([]int, hi-lo)
	for k := range out {
		out[k] = lo + k
	}
	return out
}
