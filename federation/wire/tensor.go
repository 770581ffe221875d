package wire

import (
	"encoding/hex"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"gonum.org/v1/gonum/mat"
)

// Tensor is a named array of float64 values in row-major order: a scalar
// (empty Shape, one value), a vector (one dimension) or a matrix (rows,
// columns). Envelopes hold tensors by reference: do not change a tensor's
// values once it is in an envelope (Validate would then report ErrDigest).
type Tensor struct {
	Name   string
	Shape  []int
	Values []float64
}

// Scalar returns a tensor holding one value.
func Scalar(name string, v float64) Tensor {
	return Tensor{Name: name, Values: []float64{v}}
}

// Vector returns a one-dimensional tensor holding a copy of v.
func Vector(name string, v []float64) Tensor {
	return Tensor{Name: name, Shape: []int{len(v)}, Values: append([]float64(nil), v...)}
}

// Matrix returns a rows×cols tensor holding a copy of m in row-major order.
func Matrix(name string, m mat.Matrix) Tensor {
	r, c := m.Dims()
	vals := make([]float64, 0, r*c)
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			vals = append(vals, m.At(i, j))
		}
	}
	return Tensor{Name: name, Shape: []int{r, c}, Values: vals}
}

// Matrices returns one matrix tensor per entry of m, named prefix+key and
// sorted by name, so that the same map always gives the same payload.
func Matrices(prefix string, m map[string]*mat.Dense) []Tensor {
	out := make([]Tensor, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, Matrix(prefix+k, m[k]))
	}
	return out
}

// Vectors returns one vector tensor per entry of m, named prefix+key and
// sorted by name.
func Vectors(prefix string, m map[string][]float64) []Tensor {
	out := make([]Tensor, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, Vector(prefix+k, m[k]))
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Dense returns a matrix tensor as a *mat.Dense sharing its values. A
// vector of length n becomes an n×1 matrix. Other ranks are an ErrShape
// error, as is a zero dimension, which mat.Dense cannot hold.
func (t Tensor) Dense() (*mat.Dense, error) {
	if err := t.checkShape(); err != nil {
		return nil, err
	}
	var r, c int
	switch len(t.Shape) {
	case 1:
		r, c = t.Shape[0], 1
	case 2:
		r, c = t.Shape[0], t.Shape[1]
	default:
		return nil, fmt.Errorf("wire: tensor %q of shape %s is not a matrix: %w", t.Name, t.shapeString(), ErrShape)
	}
	if r == 0 || c == 0 {
		return nil, fmt.Errorf("wire: tensor %q of shape %s is empty: %w", t.Name, t.shapeString(), ErrShape)
	}
	return mat.NewDense(r, c, t.Values), nil
}

// Scalar returns the value of a rank-0 tensor, or of a tensor with one
// value; any other tensor is an ErrShape error.
func (t Tensor) Scalar() (float64, error) {
	if err := t.checkShape(); err != nil {
		return 0, err
	}
	if len(t.Values) != 1 {
		return 0, fmt.Errorf("wire: tensor %q of shape %s is not a scalar: %w", t.Name, t.shapeString(), ErrShape)
	}
	return t.Values[0], nil
}

// checkShape checks that the dimensions are valid and their product equals
// the number of values.
func (t Tensor) checkShape() error {
	if len(t.Shape) > MaxRank {
		return fmt.Errorf("tensor %q has rank %d, more than %d: %w", t.Name, len(t.Shape), MaxRank, ErrShape)
	}
	n := 1
	for _, d := range t.Shape {
		if d < 0 || d > MaxValues {
			return fmt.Errorf("tensor %q has dimension %d: %w", t.Name, d, ErrShape)
		}
		if d != 0 && n > MaxValues/d {
			return fmt.Errorf("tensor %q of shape %s has more than %d values: %w", t.Name, t.shapeString(), MaxValues, ErrTooLarge)
		}
		n *= d
	}
	if n != len(t.Values) {
		return fmt.Errorf("tensor %q of shape %s holds %d values, want %d: %w", t.Name, t.shapeString(), len(t.Values), n, ErrShape)
	}
	return nil
}

func (t Tensor) shapeString() string {
	parts := make([]string, len(t.Shape))
	for i, d := range t.Shape {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, "×") + "]"
}

// String describes the tensor by name and shape, never by its values.
func (t Tensor) String() string { return t.Name + t.shapeString() }

// GoString is String, so that %#v does not print values either.
func (t Tensor) GoString() string { return "wire.Tensor(" + t.String() + ")" }

// LogValue logs the tensor's name and shape only.
func (t Tensor) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", t.Name), slog.String("shape", t.shapeString()))
}

// DigestSize is the size of one digest in a DigestList and of a payload
// digest: SHA-256 and HMAC-SHA256 both give 32 bytes.
const DigestSize = 32

// Digest is a SHA-256 or HMAC-SHA256 output.
type Digest [DigestSize]byte

// String returns the digest in lower-case hex.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// DigestList is a named list of digests: the HMACs of a site's rows in
// dedup-hashes, or fingerprints in hello. Other kinds may not carry one.
type DigestList struct {
	Name    string
	Digests []Digest
}

// String describes the list by name and length.
func (l DigestList) String() string { return fmt.Sprintf("%s<%d digests>", l.Name, len(l.Digests)) }

// GoString is String, so that %#v does not print the digests either.
func (l DigestList) GoString() string { return "wire.DigestList(" + l.String() + ")" }

// LogValue logs the list's name and length only.
func (l DigestList) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", l.Name), slog.Int("digests", len(l.Digests)))
}
