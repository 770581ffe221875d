package grpcnet

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/crffd/crffd/certs"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/plugins/transport"
	"github.com/crffd/crffd/plugins/transport/grpcnet/netpb"
)

// coordinator serves Relay: sites connect, and envelopes for each site wait
// in its outbox until the site acknowledges them.
type coordinator struct {
	netpb.UnimplementedRelayServer
	name    string
	log     *slog.Logger
	capture *transport.Capture
	inbox   *inbox
	queue   int
	srv     *grpc.Server
	lis     net.Listener
	rel     *certs.Reloader

	mu    sync.Mutex
	sites map[string]*outbox
}

// listen starts the coordinator's server on cfg.Coordinator.
func listen(ctx context.Context, cfg transport.Config, rel *certs.Reloader, opts settings, in *inbox, capture *transport.Capture, log *slog.Logger) (*coordinator, error) {
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", cfg.Coordinator)
	if err != nil {
		return nil, fmt.Errorf("grpc transport: listen on %s: %w: %w", cfg.Coordinator, transport.ErrConfig, err)
	}
	c := &coordinator{
		name: cfg.Name, log: log, capture: capture, inbox: in, queue: opts.queue, lis: lis, rel: rel,
		sites: make(map[string]*outbox),
	}
	creds := &loggedCreds{TransportCredentials: credentials.NewTLS(rel.ServerConfig()), log: log}
	c.srv = grpc.NewServer(grpcServerOptions(creds)...)
	netpb.RegisterRelayServer(c.srv, c)
	go c.srv.Serve(lis)
	log.Info("coordinator listening", slog.String(transport.LogKeyAddress, lis.Addr().String()))
	return c, nil
}

func (c *coordinator) close() { c.srv.Stop() }

// renewed closes the streams of sites whose certificate the revocation
// list now revokes, since TLS checks a certificate only at the handshake.
// Other streams stay: every handshake takes the current certificate
// (certs.Reloader.ServerConfig), and dropping them to present it sooner
// would gain nothing.
func (c *coordinator) renewed() {
	id := c.rel.Identity()
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, o := range c.sites {
		o.mu.Lock()
		if o.session != nil && o.cert != nil && id.Revoked(o.cert) {
			c.log.Warn("closing the stream of a site whose certificate is revoked", slog.String(transport.LogKeyPeer, name),
				slog.String(transport.LogKeySerial, o.cert.SerialNumber.Text(16)))
			o.session(errRevoked)
		}
		o.mu.Unlock()
	}
}

// outbox holds the envelopes for one site that it has not acknowledged.
type outbox struct {
	mu      sync.Mutex
	frames  []*netpb.Frame // ascending seq
	nextSeq uint64
	session context.CancelCauseFunc // cancels the site's current stream
	cert    *x509.Certificate       // the certificate the current stream was opened with
	changed chan struct{}           // closed and replaced on every change
}

func (o *outbox) broadcast() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// after returns the frames with a sequence number above seq and a channel
// that is closed when the outbox changes.
func (o *outbox) after(seq uint64) ([]*netpb.Frame, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := 0
	for i < len(o.frames) && o.frames[i].GetSeq() <= seq {
		i++
	}
	return append([]*netpb.Frame(nil), o.frames[i:]...), o.changed
}

// ack forgets the frame with sequence number seq.
func (o *outbox) ack(seq uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, f := range o.frames {
		if f.GetSeq() == seq {
			o.frames = append(o.frames[:i], o.frames[i+1:]...)
			return
		}
	}
}

// outbox returns the outbox of site name, creating it if needed.
func (c *coordinator) outbox(name string) (*outbox, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.sites[name]
	if !ok {
		if len(c.sites) >= maxPeers {
			return nil, fmt.Errorf("grpc transport: more than %d sites: %w", maxPeers, transport.ErrQueueFull)
		}
		o = &outbox{changed: make(chan struct{})}
		c.sites[name] = o
	}
	return o, nil
}

// send queues e for its site.
func (c *coordinator) send(_ context.Context, e *wire.Envelope) error {
	if e.Recipient == c.name {
		return fmt.Errorf("grpc transport: coordinator %q cannot send to itself: %w", c.name, transport.ErrRecipient)
	}
	b, err := e.Marshal()
	if err != nil {
		return fmt.Errorf("%w: %w", transport.ErrEnvelope, err)
	}
	o, err := c.outbox(e.Recipient)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.frames) >= c.queue {
		return fmt.Errorf("grpc transport: %d envelopes wait for site %q: %w", len(o.frames), e.Recipient, transport.ErrQueueFull)
	}
	o.nextSeq++
	o.frames = append(o.frames, &netpb.Frame{Seq: o.nextSeq, Envelope: b})
	o.broadcast()
	c.log.Debug("envelope queued", slog.Any(transport.LogKeyEnvelope, e))
	return nil
}

// Causes of a site's stream ending at the coordinator's hand.
var (
	// errReplaced ends a site's stream when the site connects again.
	errReplaced = errors.New("replaced by a newer connection of the same site")
	// errRevoked ends it when its certificate is revoked.
	errRevoked = errors.New("its certificate is revoked")
)

// Connect serves one site's stream.
func (c *coordinator) Connect(stream netpb.Relay_ConnectServer) error {
	name, remote, err := peerName(stream.Context())
	if err == nil && name == c.name {
		err = fmt.Errorf("a site may not use the coordinator's name %q", c.name)
	}
	// TLS checks revocation at the handshake only, and a site whose stream
	// renewed closed opens the next one over the same connection: check
	// again here, or a revoked site would be back at once.
	if cert := peerCert(stream.Context()); err == nil && cert != nil && c.rel.Identity().Revoked(cert) {
		err = fmt.Errorf("certificate revoked (serial %s)", cert.SerialNumber.Text(16))
	}
	if err != nil {
		c.log.Warn("refused a connection", slog.String(transport.LogKeyRemote, remote), slog.String(transport.LogKeyReason, err.Error()))
		return status.Error(codes.PermissionDenied, err.Error())
	}
	o, err := c.outbox(name)
	if err != nil {
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	ctx, cancel := context.WithCancelCause(stream.Context())
	defer cancel(nil)
	o.mu.Lock()
	if o.session != nil {
		o.session(errReplaced)
	}
	o.session, o.cert = cancel, peerCert(stream.Context())
	o.mu.Unlock()
	log := c.log.With(slog.String(transport.LogKeyPeer, name), slog.String(transport.LogKeyRemote, remote))
	// The serial tells an operator which certificate a site uses, such as
	// whether it has taken up a renewed one.
	log.Info("site connected", slog.String(transport.LogKeySerial, peerSerial(stream.Context())))

	s := &lockedStream{send: stream.Send}
	done := make(chan error, 1)
	go func() { done <- c.write(ctx, o, s) }()
	// The reader runs apart, so that the stream ends when ctx does (a newer
	// stream of the site, a revocation) even while the reader waits in
	// Recv, which only the end of the handler interrupts.
	read := make(chan error, 1)
	go func() { read <- c.read(ctx, name, stream, o, s, log) }()
	select {
	case err = <-read:
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	cancel(err)
	<-done
	o.mu.Lock()
	if cause := context.Cause(ctx); !errors.Is(cause, errReplaced) {
		o.session = nil
	}
	o.mu.Unlock()
	log.Info("site disconnected", slog.String(transport.LogKeyReason, fmt.Sprint(context.Cause(ctx))))
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errReplaced):
		return status.Error(codes.Aborted, errReplaced.Error())
	case errors.Is(cause, errRevoked):
		return status.Error(codes.PermissionDenied, errRevoked.Error())
	}
	return nil
}

// lockedStream serialises sends on a stream shared by the writer and the reader
// (which sends acknowledgements).
type lockedStream struct {
	mu   sync.Mutex
	send func(*netpb.Frame) error
}

func (s *lockedStream) Send(f *netpb.Frame) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.send(f)
}

// write sends the site every unacknowledged envelope, then each new one.
func (c *coordinator) write(ctx context.Context, o *outbox, s *lockedStream) error {
	var last uint64
	for {
		frames, changed := o.after(last)
		for _, f := range frames {
			if err := c.capture.Record(transport.Sent, f.GetEnvelope()); err != nil {
				c.log.Error("capture failed", slog.String(transport.LogKeyError, err.Error()))
			}
			if err := s.Send(f); err != nil {
				return err
			}
			last = f.GetSeq()
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// read takes frames from the site: acknowledgements, and envelopes, which
// it checks, puts in the inbox and acknowledges or refuses.
func (c *coordinator) read(ctx context.Context, name string, stream netpb.Relay_ConnectServer, o *outbox, s *lockedStream, log *slog.Logger) error {
	for {
		f, err := stream.Recv()
		if err != nil {
			return err
		}
		if f.GetAck() != 0 {
			o.ack(f.GetAck())
		}
		if f.GetSeq() == 0 {
			continue
		}
		if ctx.Err() != nil {
			// The stream ended (revoked, replaced) while Recv waited:
			// what it brought is not taken.
			return ctx.Err()
		}
		if err := c.capture.Record(transport.Received, f.GetEnvelope()); err != nil {
			log.Error("capture failed", slog.String(transport.LogKeyError, err.Error()))
		}
		reason := c.accept(ctx, name, f.GetEnvelope(), log)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := s.Send(&netpb.Frame{Ack: f.GetSeq(), Refused: reason}); err != nil {
			return err
		}
	}
}

// accept decodes and checks one envelope from site name and puts it in the
// inbox. It returns why it refused the envelope, or "".
func (c *coordinator) accept(ctx context.Context, name string, b []byte, log *slog.Logger) string {
	e, err := wire.Unmarshal(b)
	var reason string
	switch {
	case err != nil:
		reason = "invalid envelope: " + err.Error()
	case e.Sender != name:
		reason = fmt.Sprintf("certificate name %q does not match envelope sender %q", name, e.Sender)
	case e.Recipient != c.name:
		reason = fmt.Sprintf("recipient %q is not this coordinator %q: sites send only to the coordinator", e.Recipient, c.name)
	}
	if reason != "" {
		attrs := []any{slog.Int(wire.LogKeyEncoded, len(b)), slog.String(transport.LogKeyReason, reason)}
		var we *wire.Error
		switch {
		case e != nil:
			attrs = append(attrs, slog.Any(transport.LogKeyEnvelope, e))
		case errors.As(err, &we):
			attrs = append(attrs, slog.String(wire.LogKeyKind, we.Header.Kind.String()), slog.Uint64(wire.LogKeyRound, we.Header.Round))
		}
		log.Warn("refused an envelope", attrs...)
		return reason
	}
	if err := c.inbox.push(ctx, e); err != nil {
		return "coordinator shutting down"
	}
	log.Debug("envelope received", slog.Any(transport.LogKeyEnvelope, e))
	return ""
}
