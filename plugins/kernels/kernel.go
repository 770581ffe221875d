package kernels

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/hashicorp/go-plugin"
	"gonum.org/v1/gonum/mat"
)

// Kind is the plugin kind of kernel executables: crff-kernel-<name>.
const Kind = "kernel"

// pluginName is the key under which the kernel is dispensed.
const pluginName = "kernel"

// Handshake is the go-plugin handshake of kernel plugins, protocol version 1.
// A binary built against another protocol version is refused at launch.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "CRFFD_KERNEL_PLUGIN",
	MagicCookieValue: "c2a9d0f4-kernel-spectral-v1",
}

// ErrParam reports an unknown or invalid kernel parameter.
var ErrParam = errors.New("invalid kernel parameter")

// Params holds kernel parameters by name, such as "nu" for Matérn.
type Params map[string]float64

// String formats p as name=value pairs in name order, or "-" when empty.
func (p Params) String() string {
	if len(p) == 0 {
		return "-"
	}
	names := make([]string, 0, len(p))
	for k := range p {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s=%g", k, p[k])
	}
	return strings.Join(parts, ",")
}

// Param describes one kernel parameter.
type Param struct {
	Name        string
	Description string
	Default     float64
	// Values are the settings the self-test (crffd kernels verify) checks.
	// Empty means only Default is checked.
	Values []float64
}

// DescribeParams lists ps as NAME=DEFAULT (DESCRIPTION), joined by "; ",
// or "-" when there are none.
func DescribeParams(ps []Param) string {
	if len(ps) == 0 {
		return "-"
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = fmt.Sprintf("%s=%g (%s)", p.Name, p.Default, p.Description)
	}
	return strings.Join(parts, "; ")
}

// Info describes a kernel.
type Info struct {
	Name        string
	Description string
	Version     string
	Params      []Param
	MaxDim      int // largest input dimension accepted; 0 means no limit
}

// Resolve checks p against the declared parameters and returns a copy with
// defaults filled in. Unknown names and non-finite values are errors.
func (in Info) Resolve(p Params) (Params, error) {
	out := make(Params, len(in.Params))
	for _, d := range in.Params {
		out[d.Name] = d.Default
	}
	for k, v := range p {
		if _, ok := out[k]; !ok {
			return nil, fmt.Errorf("kernel %q has no parameter %q: %w", in.Name, k, ErrParam)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("kernel %q parameter %q = %v: %w", in.Name, k, v, ErrParam)
		}
		out[k] = v
	}
	return out, nil
}

// Kernel is what a kernel plugin implements. The server validates
// dimensions and parameters (filled with defaults) before calling it.
type Kernel interface {
	// Info describes the kernel.
	Info() Info
	// Sample returns d×count base frequencies drawn from the spectral
	// density at unit lengthscale, one frequency per column.
	Sample(d, count int, seed uint64, p Params) (*mat.Dense, error)
	// Eval returns k(a, b) exactly; len(a) == len(b).
	Eval(a, b []float64, p Params) (float64, error)
}

// NewSource returns the random source a kernel draws from for a seed. All
// built-in kernels use it, so that a seed means the same stream everywhere:
// PCG is specified bit for bit and does not depend on the platform.
func NewSource(seed uint64) rand.Source {
	return rand.NewPCG(seed, 0x6372666664) // "crffd"
}

// Columns returns a d×count matrix whose columns are filled in order by
// draw, each call receiving a zeroed slice of length d. Drawing column by
// column keeps the first columns the same whatever count is.
func Columns(d, count int, draw func(col []float64)) *mat.Dense {
	m := mat.NewDense(d, count, nil)
	col := make([]float64, d)
	for j := 0; j < count; j++ {
		clear(col)
		draw(col)
		m.SetCol(j, col)
	}
	return m
}
