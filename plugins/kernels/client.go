package kernels

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/hashicorp/go-plugin"
	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/plugins/host"
	"github.com/crffd/crffd/plugins/kernels/kernelpb"
)

// Options say which kernel plugin to launch.
type Options struct {
	Dir    string       // plugin directory
	Name   string       // kernel name: the plugin is Dir/crff-kernel-<Name>
	Pin    string       // hex SHA-256 the binary must have; empty for none
	Params Params       // kernel parameters; unset ones take the plugin's defaults
	Logger *slog.Logger // receives go-plugin's and the plugin's log lines; nil discards them
}

// Client is a running kernel plugin with its parameters bound. It satisfies
// the estimator's Spectral interface. Close kills the plugin process.
type Client struct {
	proc   *plugin.Client
	rpc    kernelpb.KernelClient
	info   Info
	params Params
	path   string
}

// Open launches the kernel plugin named in o, reads its Info and checks the
// parameters against it.
func Open(ctx context.Context, o Options) (*Client, error) {
	b, err := host.Find(o.Dir, Kind, o.Name)
	if err != nil {
		return nil, err
	}
	proc, raw, err := host.Launch(ctx, host.Config{
		Binary: b, Pin: o.Pin, Handshake: Handshake, Plugins: pluginSet(nil), Logger: o.Logger,
	}, pluginName)
	if err != nil {
		return nil, err
	}
	c := &Client{proc: proc, rpc: raw.(kernelpb.KernelClient), path: b.Path}
	resp, err := c.rpc.Info(ctx, &kernelpb.InfoRequest{})
	if err != nil {
		proc.Kill()
		return nil, errorf("info", o.Name, err)
	}
	c.info = infoFromProto(resp)
	if c.params, err = c.info.Resolve(o.Params); err != nil {
		proc.Kill()
		return nil, err
	}
	return c, nil
}

// Info returns the kernel's description as the plugin reported it.
func (c *Client) Info() Info { return c.info }

// Params returns the bound parameters, defaults included.
func (c *Client) Params() Params { return c.params }

// Path returns the plugin executable's path.
func (c *Client) Path() string { return c.path }

// WithParams returns a client of the same process with other parameters.
func (c *Client) WithParams(p Params) (*Client, error) {
	resolved, err := c.info.Resolve(p)
	if err != nil {
		return nil, err
	}
	cp := *c
	cp.params = resolved
	return &cp, nil
}

// Sample returns d×D base frequencies at unit lengthscale for seed.
func (c *Client) Sample(ctx context.Context, d, D int, seed uint64) (*mat.Dense, error) {
	if d < 1 || D < 1 {
		return nil, fmt.Errorf("kernel %q: sample %d×%d: dimensions must be positive", c.info.Name, d, D)
	}
	resp, err := c.rpc.Sample(ctx, &kernelpb.SampleRequest{Dim: uint32(d), Count: uint32(D), Seed: seed, Params: c.params})
	if err != nil {
		return nil, errorf("sample", c.info.Name, err)
	}
	if int(resp.GetRows()) != d || int(resp.GetCols()) != D || len(resp.GetData()) != d*D {
		return nil, fmt.Errorf("kernel %q: sample: got %d×%d with %d values, want %d×%d",
			c.info.Name, resp.GetRows(), resp.GetCols(), len(resp.GetData()), d, D)
	}
	return mat.NewDense(d, D, resp.GetData()), nil
}

// Eval returns k(a_i, b_i) for each row i of a and b (both n×d).
func (c *Client) Eval(ctx context.Context, a, b mat.Matrix) ([]float64, error) {
	n, d := a.Dims()
	if bn, bd := b.Dims(); bn != n || bd != d {
		return nil, fmt.Errorf("kernel %q: eval: shapes %d×%d and %d×%d differ", c.info.Name, n, d, bn, bd)
	}
	req := &kernelpb.EvalRequest{Dim: uint32(d), A: rowMajor(a), B: rowMajor(b), Params: c.params}
	resp, err := c.rpc.Eval(ctx, req)
	if err != nil {
		return nil, errorf("eval", c.info.Name, err)
	}
	if len(resp.GetValues()) != n {
		return nil, fmt.Errorf("kernel %q: eval: got %d values for %d pairs", c.info.Name, len(resp.GetValues()), n)
	}
	return resp.GetValues(), nil
}

// Close kills the plugin process.
func (c *Client) Close() error {
	c.proc.Kill()
	return nil
}

func rowMajor(m mat.Matrix) []float64 {
	r, cols := m.Dims()
	out := make([]float64, 0, r*cols)
	for i := 0; i < r; i++ {
		for j := 0; j < cols; j++ {
			out = append(out, m.At(i, j))
		}
	}
	return out
}
