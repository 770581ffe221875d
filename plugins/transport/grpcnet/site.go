package grpcnet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/crffd/crffd/certs"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/plugins/transport"
	"github.com/crffd/crffd/plugins/transport/grpcnet/netpb"
)

// minReconnect is the first pause after a failed connection attempt.
const minReconnect = 50 * time.Millisecond

// site dials the coordinator and keeps one stream open, reconnecting with
// backoff.
type site struct {
	name, addr  string
	coordinator string // the coordinator's federation name, which its certificate must carry
	serverName  string
	rel         *certs.Reloader
	opts        settings
	log         *slog.Logger
	capture     *transport.Capture
	inbox       *inbox
	seq         atomic.Uint64
	stop        context.CancelFunc
	stopped     chan struct{}

	mu      sync.Mutex
	conn    *grpc.ClientConn  // replaced when the certificate is renewed
	client  netpb.RelayClient // of conn
	cur     *session          // the connected stream, or nil
	lastErr error             // why the last connection attempt or stream ended
	changed chan struct{}     // closed and replaced when cur changes
}

// session is one Connect stream to the coordinator.
type session struct {
	stream  lockedStream
	coord   string        // the coordinator's certificate name
	done    chan struct{} // closed when the stream ends
	mu      sync.Mutex
	pending map[uint64]chan string // seq → refusal reason ("" accepted)
}

// dial starts connecting to the coordinator in the background.
func dial(cfg transport.Config, rel *certs.Reloader, opts settings, in *inbox, capture *transport.Capture, log *slog.Logger) (*site, error) {
	serverName := opts.serverName
	if serverName == "" {
		host, _, err := net.SplitHostPort(cfg.Coordinator)
		if err != nil {
			return nil, fmt.Errorf("grpc transport: coordinator address %q: %w: %w", cfg.Coordinator, transport.ErrConfig, err)
		}
		serverName = host
	}
	s := &site{
		name: cfg.Name, addr: cfg.Coordinator, coordinator: cfg.CoordinatorName, serverName: serverName, rel: rel, opts: opts, log: log, capture: capture, inbox: in,
		stopped: make(chan struct{}), lastErr: errors.New("not connected yet"), changed: make(chan struct{}),
	}
	conn, err := s.newConn()
	if err != nil {
		return nil, fmt.Errorf("grpc transport: coordinator address %q: %w: %w", cfg.Coordinator, transport.ErrConfig, err)
	}
	s.conn, s.client = conn, netpb.NewRelayClient(conn)
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go s.connectLoop(ctx)
	return s, nil
}

// newConn returns a client connection to the coordinator that presents the
// current certificate at every handshake and verifies the coordinator
// against the current CA pool.
func (s *site) newConn() (*grpc.ClientConn, error) {
	return grpc.NewClient(s.addr,
		grpc.WithTransportCredentials(credentials.NewTLS(s.rel.ClientConfig(s.serverName))),
		grpc.WithKeepaliveParams(clientKeepalive),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxFrameBytes), grpc.MaxCallSendMsgSize(maxFrameBytes)))
}

// renewed replaces the client connection, so that the site reconnects at
// once and the coordinator sees the renewed certificate now rather than
// whenever the old connection happens to drop, and so that a changed CA
// pool takes effect. The stream ends, and Send sends again over the new
// one what the coordinator had not acknowledged, as after a dropped
// network.
func (s *site) renewed() {
	conn, err := s.newConn()
	if err != nil {
		s.log.Error("cannot reconnect with the renewed certificate; the old connection stays", slog.String(transport.LogKeyError, err.Error()))
		return
	}
	s.mu.Lock()
	old := s.conn
	s.conn, s.client = conn, netpb.NewRelayClient(conn)
	s.mu.Unlock()
	s.log.Info("reconnecting to the coordinator with the renewed certificate", slog.String(transport.LogKeyAddress, s.addr))
	old.Close()
}

func (s *site) close() {
	s.stop()
	<-s.stopped
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conn.Close()
}

// connectLoop keeps a stream to the coordinator open until ctx ends.
func (s *site) connectLoop(ctx context.Context) {
	defer close(s.stopped)
	pause := minReconnect
	for ctx.Err() == nil {
		start := time.Now()
		s.mu.Lock()
		conn, client := s.conn, s.client
		s.mu.Unlock()
		err := s.connect(ctx, client)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		s.lastErr = err
		replaced := s.conn != conn
		s.mu.Unlock()
		if replaced { // by renewed, which has logged why
			pause = minReconnect
			continue
		}
		s.log.Warn("connection to the coordinator ended", slog.String(transport.LogKeyAddress, s.addr), slog.String(transport.LogKeyReason, err.Error()))
		if time.Since(start) > s.opts.reconnectMax {
			pause = minReconnect // the stream was up for a while: retry soon
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return
		}
		pause = min(2*pause, s.opts.reconnectMax)
	}
}

// connect opens one stream and serves it until it ends.
func (s *site) connect(ctx context.Context, client netpb.RelayClient) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.Connect(sctx)
	if err != nil {
		return err
	}
	coord, _, err := peerName(stream.Context())
	if err == nil && coord != s.coordinator {
		err = fmt.Errorf("server certificate names %q, not the coordinator %q: %w", coord, s.coordinator, certs.ErrName)
	}
	if err != nil {
		return fmt.Errorf("coordinator at %s: %w", s.addr, err)
	}
	sess := &session{stream: lockedStream{send: stream.Send}, coord: coord, done: make(chan struct{}), pending: make(map[uint64]chan string)}
	s.setSession(sess)
	s.log.Info("connected to the coordinator", slog.String(transport.LogKeyPeer, coord), slog.String(transport.LogKeyAddress, s.addr),
		slog.String(transport.LogKeySerial, peerSerial(stream.Context())))
	err = s.read(sctx, stream, sess)
	s.setSession(nil)
	close(sess.done)
	return err
}

func (s *site) setSession(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur = sess
	close(s.changed)
	s.changed = make(chan struct{})
}

// read takes frames from the coordinator until the stream ends.
func (s *site) read(ctx context.Context, stream netpb.Relay_ConnectClient, sess *session) error {
	for {
		f, err := stream.Recv()
		if err != nil {
			return err
		}
		if f.GetAck() != 0 {
			sess.resolve(f.GetAck(), f.GetRefused())
		}
		if f.GetSeq() == 0 {
			continue
		}
		if err := s.capture.Record(transport.Received, f.GetEnvelope()); err != nil {
			s.log.Error("capture failed", slog.String(transport.LogKeyError, err.Error()))
		}
		reason := s.accept(ctx, sess.coord, f.GetEnvelope())
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := sess.stream.Send(&netpb.Frame{Ack: f.GetSeq(), Refused: reason}); err != nil {
			return err
		}
	}
}

// accept decodes and checks one envelope from the coordinator and puts it
// in the inbox. It returns why it refused the envelope, or "".
func (s *site) accept(ctx context.Context, coord string, b []byte) string {
	e, err := wire.Unmarshal(b)
	var reason string
	switch {
	case err != nil:
		reason = "invalid envelope: " + err.Error()
	case e.Sender != coord:
		reason = fmt.Sprintf("certificate name %q does not match envelope sender %q", coord, e.Sender)
	case e.Recipient != s.name:
		reason = fmt.Sprintf("recipient %q is not this site %q", e.Recipient, s.name)
	}
	if reason != "" {
		s.log.Warn("refused an envelope", slog.String(transport.LogKeyPeer, coord),
			slog.Int(wire.LogKeyEncoded, len(b)), slog.String(transport.LogKeyReason, reason))
		return reason
	}
	if err := s.inbox.push(ctx, e); err != nil {
		return "site shutting down"
	}
	s.log.Debug("envelope received", slog.Any(transport.LogKeyEnvelope, e))
	return ""
}

// resolve hands the coordinator's answer to the Send waiting for it.
func (sess *session) resolve(seq uint64, refused string) {
	sess.mu.Lock()
	ch, ok := sess.pending[seq]
	delete(sess.pending, seq)
	sess.mu.Unlock()
	if ok {
		ch <- refused
	}
}

// waitSession returns the connected session, waiting for one until ctx ends.
func (s *site) waitSession(ctx context.Context) (*session, error) {
	for {
		s.mu.Lock()
		cur, changed := s.cur, s.changed
		s.mu.Unlock()
		if cur != nil {
			return cur, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			s.mu.Lock()
			last := s.lastErr
			s.mu.Unlock()
			return nil, fmt.Errorf("grpc transport: coordinator at %s not reachable (%w; last error: %v): %w", s.addr, ctx.Err(), last, transport.ErrUnavailable)
		}
	}
}

// send delivers e to the coordinator and waits for its answer, sending it
// again over a new stream if the stream breaks first.
func (s *site) send(ctx context.Context, e *wire.Envelope) error {
	b, err := e.Marshal()
	if err != nil {
		return fmt.Errorf("%w: %w", transport.ErrEnvelope, err)
	}
	seq := s.seq.Add(1)
	for {
		sess, err := s.waitSession(ctx)
		if err != nil {
			return err
		}
		if e.Recipient != sess.coord {
			return fmt.Errorf("grpc transport: recipient %q: a site sends only to its coordinator %q: %w", e.Recipient, sess.coord, transport.ErrRecipient)
		}
		answer := make(chan string, 1)
		sess.mu.Lock()
		sess.pending[seq] = answer
		sess.mu.Unlock()
		if err := s.capture.Record(transport.Sent, b); err != nil {
			s.log.Error("capture failed", slog.String(transport.LogKeyError, err.Error()))
		}
		if err := sess.stream.Send(&netpb.Frame{Seq: seq, Envelope: b}); err != nil {
			<-sess.done // the reader sees the broken stream too
			continue
		}
		select {
		case reason := <-answer:
			if reason != "" {
				return fmt.Errorf("grpc transport: coordinator %q refused %s round %d: %s: %w", sess.coord, e.Kind, e.Round, reason, transport.ErrRefused)
			}
			s.log.Debug("envelope delivered", slog.Any(transport.LogKeyEnvelope, e))
			return nil
		case <-sess.done:
			continue
		case <-ctx.Done():
			sess.mu.Lock()
			delete(sess.pending, seq)
			sess.mu.Unlock()
			return fmt.Errorf("grpc transport: no answer from coordinator %q (%w): %w", sess.coord, ctx.Err(), transport.ErrUnavailable)
		}
	}
}
