package kernels

import (
	"context"
	"fmt"
	"math"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/crffd/crffd/plugins/kernels/kernelpb"
)

// MaxSampleValues bounds d×count in one Sample call, so that one sample
// fits in one gRPC message.
const MaxSampleValues = 1 << 24

// grpcPlugin is the go-plugin glue: on the plugin side it registers the
// server, on the host side it builds the stub.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl Kernel
}

var _ plugin.GRPCPlugin = (*grpcPlugin)(nil)

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	kernelpb.RegisterKernelServer(s, &server{impl: p.impl})
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return kernelpb.NewKernelClient(c), nil
}

// pluginSet returns the plugin map shared by both sides.
func pluginSet(impl Kernel) plugin.PluginSet {
	return plugin.PluginSet{pluginName: &grpcPlugin{impl: impl}}
}

// server adapts a Kernel to the gRPC service, checking every request so
// that a plugin author only writes the mathematics.
type server struct {
	kernelpb.UnimplementedKernelServer
	impl Kernel
}

func infoToProto(in Info) *kernelpb.InfoResponse {
	r := &kernelpb.InfoResponse{Name: in.Name, Description: in.Description, Version: in.Version, MaxDim: uint32(in.MaxDim)}
	for _, p := range in.Params {
		r.Params = append(r.Params, &kernelpb.Param{Name: p.Name, Description: p.Description, DefaultValue: p.Default, Values: p.Values})
	}
	return r
}

func infoFromProto(r *kernelpb.InfoResponse) Info {
	in := Info{Name: r.GetName(), Description: r.GetDescription(), Version: r.GetVersion(), MaxDim: int(r.GetMaxDim())}
	for _, p := range r.GetParams() {
		in.Params = append(in.Params, Param{Name: p.GetName(), Description: p.GetDescription(), Default: p.GetDefaultValue(), Values: p.GetValues()})
	}
	return in
}

func (s *server) Info(context.Context, *kernelpb.InfoRequest) (*kernelpb.InfoResponse, error) {
	return infoToProto(s.impl.Info()), nil
}

func (s *server) checkDim(info Info, d int) error {
	if d < 1 {
		return status.Errorf(codes.InvalidArgument, "dimension %d: must be at least 1", d)
	}
	if info.MaxDim > 0 && d > info.MaxDim {
		return status.Errorf(codes.InvalidArgument, "dimension %d: kernel %q accepts at most %d", d, info.Name, info.MaxDim)
	}
	return nil
}

func (s *server) Sample(_ context.Context, req *kernelpb.SampleRequest) (resp *kernelpb.SampleResponse, err error) {
	defer recoverPanic("sample", &err)
	info := s.impl.Info()
	d, n := int(req.GetDim()), int(req.GetCount())
	if err := s.checkDim(info, d); err != nil {
		return nil, err
	}
	if n < 1 || d*n > MaxSampleValues {
		return nil, status.Errorf(codes.InvalidArgument, "sample %d×%d: count must be at least 1 and d×count at most %d", d, n, MaxSampleValues)
	}
	p, err := info.Resolve(req.GetParams())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	m, err := s.impl.Sample(d, n, req.GetSeed(), p)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "sample: %v", err)
	}
	if r, c := m.Dims(); r != d || c != n {
		return nil, status.Errorf(codes.Internal, "kernel %q returned a %d×%d sample, want %d×%d", info.Name, r, c, d, n)
	}
	data := make([]float64, 0, d*n)
	for i := 0; i < d; i++ {
		data = append(data, m.RawRowView(i)...)
	}
	for i, v := range data {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, status.Errorf(codes.Internal, "kernel %q returned a non-finite frequency at (%d, %d)", info.Name, i/n, i%n)
		}
	}
	return &kernelpb.SampleResponse{Rows: uint32(d), Cols: uint32(n), Data: data}, nil
}

func (s *server) Eval(_ context.Context, req *kernelpb.EvalRequest) (resp *kernelpb.EvalResponse, err error) {
	defer recoverPanic("eval", &err)
	info := s.impl.Info()
	d := int(req.GetDim())
	if err := s.checkDim(info, d); err != nil {
		return nil, err
	}
	a, b := req.GetA(), req.GetB()
	if len(a) != len(b) || len(a)%d != 0 {
		return nil, status.Errorf(codes.InvalidArgument, "eval: %d and %d values do not form pairs of dimension %d", len(a), len(b), d)
	}
	p, err := info.Resolve(req.GetParams())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	out := make([]float64, len(a)/d)
	for i := range out {
		v, err := s.impl.Eval(a[i*d:(i+1)*d], b[i*d:(i+1)*d], p)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "eval pair %d: %v", i, err)
		}
		out[i] = v
	}
	return &kernelpb.EvalResponse{Values: out}, nil
}

// recoverPanic turns a panic in a plugin author's code into an error for
// the host, so that one bad request does not kill the plugin process.
func recoverPanic(op string, err *error) {
	if r := recover(); r != nil {
		*err = status.Errorf(codes.Internal, "%s panicked: %v", op, r)
	}
}

// errorf wraps a gRPC error from the plugin with the operation and kernel.
func errorf(op, name string, err error) error {
	st, ok := status.FromError(err)
	switch {
	case ok && st.Code() == codes.Canceled:
		return fmt.Errorf("kernel %q: %s: %w", name, op, context.Canceled)
	case ok && st.Code() == codes.DeadlineExceeded:
		return fmt.Errorf("kernel %q: %s: %w", name, op, context.DeadlineExceeded)
	case ok && st.Code() != codes.Unknown:
		return fmt.Errorf("kernel %q: %s: %s", name, op, st.Message())
	}
	return fmt.Errorf("kernel %q: %s: %w", name, op, err)
}
