package records

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// Data holds the rows of one site that a model is trained or scored on.
// Row i of X, W[i] and Y[i] describe the same record.
type Data struct {
	X *mat.Dense // n×dx covariates, in Schema order
	W []float64  // n treatments, each 0 or 1
	Y []float64  // n outcomes: real, or 0/1 when Schema.BinaryOutcome
}

// Rows returns the number of rows n.
func (d *Data) Rows() int { return len(d.W) }

// Schema describes the columns shared by every site of a federation.
type Schema struct {
	Binary        []bool // per covariate: true for a Bernoulli column, false for a continuous one
	BinaryOutcome bool   // the outcome is 0/1 rather than real
}

// RowKeys returns a key for each row of d that depends on the row alone:
// the first 8 bytes of HMAC-SHA256(key, the SHA-256 of the row's
// covariates, treatment and outcome as float64 bits, and the number of
// identical rows before it). Identical rows are interchangeable, so
// numbering them keeps each key a function of the multiset of rows, not of
// where a row sits, while each copy gets a key of its own. Differentially
// private code keys a row's coins and random draws by it, so that adding
// or removing a row leaves every other row's draws as they were.
func (d *Data) RowKeys(key []byte) []uint64 {
	n := len(d.W)
	keys := make([]uint64, n)
	if n == 0 {
		return keys
	}
	_, dx := d.X.Dims()
	seen := make(map[[sha256.Size]byte]uint64)
	buf := make([]byte, 0, 8*(dx+2))
	mac := hmac.New(sha256.New, key)
	for i := range n {
		b := buf[:0]
		for _, v := range d.X.RawRowView(i) {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(d.W[i]))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(d.Y[i]))
		content := sha256.Sum256(b)
		occ := seen[content]
		seen[content] = occ + 1
		mac.Reset()
		mac.Write(content[:])
		mac.Write(binary.LittleEndian.AppendUint64(b[:0], occ))
		keys[i] = binary.LittleEndian.Uint64(mac.Sum(b[:0]))
	}
	return keys
}

// Moments are the sufficient statistics a site shares for standardisation:
// no row values, only counts and column sums.
type Moments struct {
	N     int       // rows
	Sum   []float64 // per covariate, then the outcome: Σ value
	SumSq []float64 // per covariate, then the outcome: Σ value²

	// Outcome statistics for the estimator's log transform of outcomes: the
	// number of rows with y > 0, and Σ log y and Σ (log y)² over them.
	// A producer that leaves them zero disables the transform.
	Positive int
	LogSum   float64
	LogSumSq float64
}

// Moments returns the site's Moments over all its rows.
func (d *Data) Moments() Moments {
	_, dx := d.X.Dims()
	m := Moments{Sum: make([]float64, dx+1), SumSq: make([]float64, dx+1)}
	m.Add(d)
	return m
}

// Add adds the rows of d to m, whose Sum and SumSq hold one value per
// covariate of d and one for the outcome. The sums run in row order, so
// that the Moments of rows added a chunk at a time, in order, are those of
// all the rows at once, bit for bit: a site that reads its rows in chunks
// agrees with one that holds them.
func (m *Moments) Add(d *Data) {
	n, dx := d.X.Dims()
	m.N += n
	for i := range n {
		for j, v := range d.X.RawRowView(i) {
			m.Sum[j] += v
			m.SumSq[j] += v * v
		}
		y := d.Y[i]
		m.Sum[dx] += y
		m.SumSq[dx] += y * y
		if y > 0 {
			l := math.Log(y)
			m.Positive++
			m.LogSum += l
			m.LogSumSq += l * l
		}
	}
}

// MomentsWithin returns the Moments of d, rows of all. Their log moments
// are left zero, which disables the log transform, unless every row of
// all, in d or not, has y > 0: models standardised on some rows score all
// of them.
func (d *Data) MomentsWithin(all *Data) Moments {
	m := d.Moments()
	if !all.Positive() {
		m.Positive, m.LogSum, m.LogSumSq = 0, 0, 0
	}
	return m
}

// Positive reports whether every outcome of d is above 0, as the log
// transform of outcomes needs.
func (d *Data) Positive() bool {
	return !slices.ContainsFunc(d.Y, func(y float64) bool { return !(y > 0) })
}

// Subset returns the rows idx of d, in that order, as new Data.
func (d *Data) Subset(idx []int) *Data {
	_, dx := d.X.Dims()
	out := &Data{X: &mat.Dense{}, W: make([]float64, len(idx)), Y: make([]float64, len(idx))}
	if len(idx) == 0 {
		return out
	}
	out.X = mat.NewDense(len(idx), dx, nil)
	for r, i := range idx {
		copy(out.X.RawRowView(r), d.X.RawRowView(i))
		out.W[r], out.Y[r] = d.W[i], d.Y[i]
	}
	return out
}

// Append returns the rows of d followed by those of o, as new Data.
func (d *Data) Append(o *Data) *Data {
	n, m := d.Rows(), o.Rows()
	out := &Data{X: &mat.Dense{}, W: append(append([]float64{}, d.W...), o.W...), Y: append(append([]float64{}, d.Y...), o.Y...)}
	if n+m == 0 {
		return out
	}
	// Data without rows may hold an empty matrix of no columns, so the
	// width comes from a side that has rows.
	_, dx := d.X.Dims()
	if n == 0 {
		_, dx = o.X.Dims()
	}
	out.X = mat.NewDense(n+m, dx, nil)
	for i := range n {
		copy(out.X.RawRowView(i), d.X.RawRowView(i))
	}
	for i := range m {
		copy(out.X.RawRowView(n+i), o.X.RawRowView(i))
	}
	return out
}
