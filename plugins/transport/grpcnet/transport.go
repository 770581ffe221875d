package grpcnet

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"

	"github.com/crffd/crffd/certs"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/plugins/transport"
)

// Options of this transport, in transport.Config.Options.
const (
	OptionServerName   = "server_name"
	OptionQueue        = "queue"
	OptionReconnectMax = "reconnect_max"
)

// Defaults and limits.
const (
	DefaultQueue        = 1024
	DefaultReconnectMax = 5 * time.Second
	// maxFrameBytes bounds one gRPC message: an envelope and a little framing.
	maxFrameBytes = wire.MaxEnvelopeBytes + 1<<16
	// maxPeers bounds the number of site queues a coordinator keeps.
	maxPeers = 4096
)

// certCheckEvery is how often the certificate files are checked for a
// renewal besides at every handshake: a site holds one connection for
// months, so without this a renewed certificate, or a broken renewal,
// would come to light only when that connection drops.
var certCheckEvery = 10 * time.Second

// keepalive settings: a dead connection is noticed within a minute.
var (
	clientKeepalive = keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 20 * time.Second, PermitWithoutStream: true}
	serverKeepalive = keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 20 * time.Second}
	serverEnforce   = keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}
)

// role is the part of the transport that depends on the daemon's role.
type role interface {
	send(ctx context.Context, e *wire.Envelope) error
	// renewed is called when the certificate files were loaded again.
	renewed()
	close()
}

// Transport is the grpc transport. It implements transport.Transport.
type Transport struct {
	log *slog.Logger

	mu        sync.Mutex
	role      role
	inbox     *inbox
	capture   *transport.Capture
	stopWatch func() // stops watching the certificate files and waits
}

var _ transport.Transport = (*Transport)(nil)

// New returns an unconfigured transport that logs to log (nil discards).
func New(log *slog.Logger) *Transport {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Transport{log: log}
}

// settings are the parsed options.
type settings struct {
	serverName   string
	queue        int
	reconnectMax time.Duration
}

func parseOptions(cfg transport.Config) (settings, error) {
	s := settings{queue: DefaultQueue, reconnectMax: DefaultReconnectMax}
	for k, v := range cfg.Options {
		var err error
		switch k {
		case transport.OptionCapture, transport.OptionLogLevel:
		case OptionServerName:
			s.serverName = v
		case OptionQueue:
			s.queue, err = strconv.Atoi(v)
			if err == nil && s.queue < 1 {
				err = fmt.Errorf("must be at least 1")
			}
		case OptionReconnectMax:
			s.reconnectMax, err = time.ParseDuration(v)
			if err == nil && s.reconnectMax <= 0 {
				err = fmt.Errorf("must be positive")
			}
		default:
			err = fmt.Errorf("unknown option")
		}
		if err != nil {
			return s, fmt.Errorf("grpc transport: option %s=%q: %v: %w", k, v, err, transport.ErrConfig)
		}
	}
	return s, nil
}

// Configure loads the certificate files, checks that the certificate names
// cfg.Name, and starts listening (coordinator) or connecting (site). The
// files are followed from then on (certs.Reloader): a renewed certificate
// is used from the next handshake on, and a site reconnects at once to
// present it; files that cannot be used are logged and the previous
// certificate stays.
func (t *Transport) Configure(ctx context.Context, cfg transport.Config) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.role != nil {
		return "", fmt.Errorf("grpc transport: configured already: %w", transport.ErrConfig)
	}
	opts, err := parseOptions(cfg)
	if err != nil {
		return "", err
	}
	if cfg.Coordinator == "" {
		return "", fmt.Errorf("grpc transport: no coordinator address: %w", transport.ErrConfig)
	}
	rel, err := certs.NewReloader(cfg.TLS, func(id *certs.Identity, err error) { transport.LogReload(t.log, cfg.TLS, id, err) })
	if err != nil {
		return "", fmt.Errorf("grpc transport: %w: %w", transport.ErrConfig, err)
	}
	id := rel.Identity()
	if id.Name != cfg.Name {
		return "", fmt.Errorf("grpc transport: certificate %s names %q, but this daemon is configured as %q: %w",
			cfg.TLS.Cert, id.Name, cfg.Name, transport.ErrConfig)
	}
	want := certs.RoleSite
	if cfg.Role == transport.RoleCoordinator {
		want = certs.RoleCoordinator
	}
	if err := id.Can(want); err != nil {
		return "", fmt.Errorf("grpc transport: %s: %w: %w", cfg.TLS.Cert, transport.ErrConfig, err)
	}
	if cfg.Role == transport.RoleSite && cfg.CoordinatorName == "" {
		return "", fmt.Errorf("grpc transport: no coordinator name: a site must know whose certificate to accept: %w", transport.ErrConfig)
	}
	capture, err := transport.OpenCapture(cfg.Options[transport.OptionCapture])
	if err != nil {
		return "", err
	}
	in := newInbox(opts.queue)
	var r role
	addr := ""
	switch cfg.Role {
	case transport.RoleCoordinator:
		var c *coordinator
		c, err = listen(ctx, cfg, rel, opts, in, capture, t.log)
		if err == nil {
			r, addr = c, c.lis.Addr().String()
		}
	default:
		r, err = dial(cfg, rel, opts, in, capture, t.log)
	}
	if err != nil {
		capture.Close()
		return "", err
	}
	t.role, t.inbox, t.capture = r, in, capture
	t.stopWatch = watch(rel, id, r)
	return addr, nil
}

// watch checks the certificate files every certCheckEvery and tells r when
// the identity changed, whoever noticed the change (a handshake may have).
// It returns a function that stops watching and waits.
func watch(rel *certs.Reloader, id *certs.Identity, r role) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(certCheckEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if now, _, _ := rel.Refresh(); now != id {
				id = now
				r.renewed()
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (t *Transport) configured() (role, *inbox, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.role == nil {
		return nil, nil, transport.ErrNotConfigured
	}
	return t.role, t.inbox, nil
}

// Send queues e for its site (coordinator) or delivers it to the
// coordinator and waits for its acknowledgement (site).
func (t *Transport) Send(ctx context.Context, e *wire.Envelope) error {
	r, _, err := t.configured()
	if err != nil {
		return err
	}
	return r.send(ctx, e)
}

// Receive delivers the envelopes received from peers, in order.
func (t *Transport) Receive(ctx context.Context, deliver func(*wire.Envelope) error) error {
	_, in, err := t.configured()
	if err != nil {
		return err
	}
	return in.receive(ctx, deliver)
}

// Close stops listening or connecting and closes the capture file.
func (t *Transport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopWatch != nil {
		t.stopWatch()
		t.stopWatch = nil
	}
	if t.role != nil {
		t.role.close()
	}
	return t.capture.Close()
}

// peerName returns the federation name of the certificate the peer of a
// gRPC stream presented.
func peerName(ctx context.Context) (name, remote string, err error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", "", fmt.Errorf("no peer information")
	}
	if p.Addr != nil {
		remote = p.Addr.String()
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return "", remote, fmt.Errorf("connection is not TLS")
	}
	name, err = certs.PeerName(info.State)
	return name, remote, err
}

// peerCert returns the verified certificate the peer of a gRPC stream
// presented, or nil.
func peerCert(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return info.State.VerifiedChains[0][0]
}

// peerSerial returns the serial number, in hex, of the verified
// certificate the peer of a gRPC stream presented, or "".
func peerSerial(ctx context.Context) string {
	if c := peerCert(ctx); c != nil {
		return c.SerialNumber.Text(16)
	}
	return ""
}

// loggedCreds logs the TLS handshakes a server refuses, with the reason,
// such as a client certificate from another CA.
type loggedCreds struct {
	credentials.TransportCredentials
	log *slog.Logger
}

func (c *loggedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		c.log.Warn("refused a connection: TLS handshake failed",
			slog.String(transport.LogKeyRemote, raw.RemoteAddr().String()), slog.String(transport.LogKeyReason, err.Error()))
	}
	return conn, info, err
}

func (c *loggedCreds) Clone() credentials.TransportCredentials {
	return &loggedCreds{TransportCredentials: c.TransportCredentials.Clone(), log: c.log}
}

// grpcServerOptions returns the options of the coordinator's server.
func grpcServerOptions(creds credentials.TransportCredentials) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.Creds(creds),
		grpc.MaxRecvMsgSize(maxFrameBytes),
		grpc.MaxSendMsgSize(maxFrameBytes),
		grpc.KeepaliveParams(serverKeepalive),
		grpc.KeepaliveEnforcementPolicy(serverEnforce),
	}
}
