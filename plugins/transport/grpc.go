package transport

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/crffd/crffd/certs"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/plugins/transport/transportpb"
)

// grpcPlugin is the go-plugin glue: on the plugin side it registers the
// server, on the host side it builds the stub.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl Transport
	log  *PluginLogger
}

var _ plugin.GRPCPlugin = (*grpcPlugin)(nil)

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	transportpb.RegisterTransportServer(s, newServer(p.impl, p.log))
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return transportpb.NewTransportClient(c), nil
}

// pluginSet returns the plugin map shared by both sides.
func pluginSet(impl Transport, log *PluginLogger) plugin.PluginSet {
	return plugin.PluginSet{pluginName: &grpcPlugin{impl: impl, log: log}}
}

// server adapts a Transport to the gRPC service and checks every request.
type server struct {
	transportpb.UnimplementedTransportServer
	impl Transport
	log  *PluginLogger

	mu  sync.Mutex
	cfg *Config // nil until configured

	receiving sync.Mutex // serialises Receive calls
}

func newServer(impl Transport, log *PluginLogger) *server {
	if log == nil {
		log = NewPluginLogger(nil)
	}
	return &server{impl: impl, log: log}
}

func configFromProto(r *transportpb.ConfigureRequest) Config {
	return Config{
		Name:            r.GetName(),
		Role:            Role(r.GetRole()),
		Coordinator:     r.GetCoordinatorAddress(),
		CoordinatorName: r.GetCoordinatorName(),
		TLS:             certs.Files{CA: r.GetCaCertFile(), Cert: r.GetCertFile(), Key: r.GetKeyFile(), CRL: r.GetCrlFile()},
		Options:         r.GetOptions(),
	}
}

func configToProto(c Config) *transportpb.ConfigureRequest {
	return &transportpb.ConfigureRequest{
		Name:               c.Name,
		Role:               transportpb.Role(c.Role),
		CoordinatorAddress: c.Coordinator,
		CoordinatorName:    c.CoordinatorName,
		CaCertFile:         c.TLS.CA,
		CertFile:           c.TLS.Cert,
		KeyFile:            c.TLS.Key,
		CrlFile:            c.TLS.CRL,
		Options:            c.Options,
	}
}

func (s *server) config() (Config, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg == nil {
		return Config{}, ErrNotConfigured
	}
	return *s.cfg, nil
}

func (s *server) Configure(ctx context.Context, req *transportpb.ConfigureRequest) (resp *transportpb.ConfigureResponse, err error) {
	defer recoverPanic("configure", &err)
	cfg := configFromProto(req)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg != nil {
		return nil, toStatus(fmt.Errorf("already configured as %q: %w", s.cfg.Name, ErrConfig))
	}
	if err := cfg.Check(); err != nil {
		return nil, toStatus(err)
	}
	if err := s.log.SetLevel(cfg.Options[OptionLogLevel]); err != nil {
		return nil, toStatus(err)
	}
	addr, err := s.impl.Configure(ctx, cfg)
	if err != nil {
		return nil, toStatus(err)
	}
	s.cfg = &cfg
	s.log.Logger().Info("transport configured", LogKeyName, cfg.Name, LogKeyRole, cfg.Role.String(), LogKeyAddress, addr)
	if path := cfg.Options[OptionCapture]; path != "" {
		s.log.Logger().Warn("capture is on: every envelope carried is appended to a file; for tests only", LogKeyPath, path)
	}
	return &transportpb.ConfigureResponse{Address: addr}, nil
}

func (s *server) Send(ctx context.Context, req *transportpb.SendRequest) (resp *transportpb.SendResponse, err error) {
	defer recoverPanic("send", &err)
	cfg, err := s.config()
	if err != nil {
		return nil, toStatus(err)
	}
	e, err := wire.FromProto(req.GetEnvelope())
	if err != nil {
		return nil, toStatus(err)
	}
	if e.Sender != cfg.Name {
		return nil, toStatus(fmt.Errorf("envelope names sender %q, this daemon is %q: %w", e.Sender, cfg.Name, ErrSender))
	}
	ctx, cancel := answerMargin(ctx)
	defer cancel()
	if err := s.impl.Send(ctx, e); err != nil {
		return nil, toStatus(err)
	}
	return &transportpb.SendResponse{}, nil
}

func (s *server) Receive(req *transportpb.ReceiveRequest, stream transportpb.Transport_ReceiveServer) (err error) {
	defer recoverPanic("receive", &err)
	cfg, err := s.config()
	if err != nil {
		return toStatus(err)
	}
	ctx := stream.Context()
	s.receiving.Lock()
	defer s.receiving.Unlock()
	log := s.log.Logger()
	err = s.impl.Receive(ctx, func(e *wire.Envelope) error {
		if err := e.Validate(); err != nil {
			log.Warn("dropped an invalid envelope from the transport", LogKeyReason, err.Error())
			return nil
		}
		if e.Recipient != cfg.Name {
			log.Warn("dropped an envelope for another daemon",
				slog.Any(LogKeyEnvelope, e), slog.String(LogKeyReason, fmt.Sprintf("recipient %q is not %q", e.Recipient, cfg.Name)))
			return nil
		}
		return stream.Send(&transportpb.ReceiveResponse{Envelope: e.Proto()})
	})
	if ctx.Err() != nil {
		return nil // the host ended the stream
	}
	return toStatus(err)
}

// answerMargin returns ctx with its deadline moved a little earlier, so
// that the implementation gives up in time for its reason (such as the
// last connection error) to reach the host before the host's deadline.
func answerMargin(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	margin := min(max(time.Until(deadline)/20, 20*time.Millisecond), 250*time.Millisecond)
	return context.WithDeadline(ctx, deadline.Add(-margin))
}

// recoverPanic turns a panic in a plugin author's code into an error for
// the host, so that one bad request does not kill the plugin process.
func recoverPanic(op string, err *error) {
	if r := recover(); r != nil {
		*err = toStatus(fmt.Errorf("%s panicked: %v", op, r))
	}
}
