package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/hashicorp/go-plugin"

	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/plugins/host"
	"github.com/crffd/crffd/plugins/transport/transportpb"
)

// Options say which transport plugin to launch and how to configure it.
type Options struct {
	Dir    string       // plugin directory
	Name   string       // transport name: the plugin is Dir/crff-transport-<Name>
	Pin    string       // hex SHA-256 the binary must have; empty for none
	Logger *slog.Logger // receives the plugin's and the client's log lines; nil discards them
	Config Config       // the daemon's identity and the transport's settings
}

// Client is a running, configured transport plugin. Its methods are safe
// for concurrent use. Close kills the plugin process.
type Client struct {
	proc    *plugin.Client // nil for an in-process test client
	rpc     transportpb.TransportClient
	name    string
	cfg     Config
	address string
	log     *slog.Logger
}

// Open launches the transport plugin named in o and configures it.
func Open(ctx context.Context, o Options) (*Client, error) {
	if err := o.Config.Check(); err != nil {
		return nil, err
	}
	b, err := host.Find(o.Dir, Kind, o.Name)
	if err != nil {
		return nil, err
	}
	proc, raw, err := host.Launch(ctx, host.Config{
		Binary: b, Pin: o.Pin, Handshake: Handshake, Plugins: pluginSet(nil, nil), Logger: o.Logger,
	}, pluginName)
	if err != nil {
		return nil, err
	}
	c := &Client{proc: proc, rpc: raw.(transportpb.TransportClient), name: o.Name, cfg: o.Config, log: orDiscard(o.Logger)}
	if err := c.configure(ctx); err != nil {
		proc.Kill()
		return nil, err
	}
	return c, nil
}

func (c *Client) configure(ctx context.Context) error {
	resp, err := c.rpc.Configure(ctx, configToProto(c.cfg))
	if err != nil {
		return fromStatus(c.name, "configure", err)
	}
	c.address = resp.GetAddress()
	return nil
}

// Address returns the address the transport listens on, with the port
// resolved; "" when it does not listen.
func (c *Client) Address() string { return c.address }

// Config returns the configuration the transport was opened with.
func (c *Client) Config() Config { return c.cfg }

// Send validates e and hands it to the transport for delivery to
// e.Recipient. e's sender must be the configured name.
func (c *Client) Send(ctx context.Context, e *wire.Envelope) error {
	if err := e.Validate(); err != nil {
		return fmt.Errorf("transport %q: send: %w: %w", c.name, ErrEnvelope, err)
	}
	if e.Sender != c.cfg.Name {
		return fmt.Errorf("transport %q: send: envelope names sender %q, this daemon is %q: %w", c.name, e.Sender, c.cfg.Name, ErrSender)
	}
	if _, err := c.rpc.Send(ctx, &transportpb.SendRequest{Envelope: e.Proto()}); err != nil {
		err = fromStatus(c.name, "send "+e.Kind.String()+" to "+e.Recipient, err)
		if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrUnavailable) {
			err = fmt.Errorf("%w (%w)", err, ErrUnavailable)
		}
		return err
	}
	c.log.Debug("envelope sent", slog.Any(LogKeyEnvelope, e))
	return nil
}

// Receive opens the stream of envelopes addressed to this daemon. The
// Inbox's channel delivers valid envelopes in order of arrival and is
// closed when ctx ends or the stream fails; Inbox.Err then says why. An
// envelope that fails validation is dropped and logged with the reason.
// Open one Receive at a time: the plugin serves one stream at a time.
func (c *Client) Receive(ctx context.Context) *Inbox {
	in := &Inbox{ch: make(chan *wire.Envelope)}
	go in.run(ctx, c)
	return in
}

// Close kills the plugin process.
func (c *Client) Close() error {
	if c.proc != nil {
		c.proc.Kill()
	}
	return nil
}

// Inbox is an open Receive stream.
type Inbox struct {
	ch chan *wire.Envelope

	mu      sync.Mutex
	err     error
	dropped int
}

// C returns the channel of received envelopes. It is closed when the
// stream ends.
func (in *Inbox) C() <-chan *wire.Envelope { return in.ch }

// Err returns why the stream ended once C is closed: the context's error
// when ctx ended, another error when the plugin failed; nil before.
func (in *Inbox) Err() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.err
}

// Dropped returns how many invalid envelopes the stream dropped.
func (in *Inbox) Dropped() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.dropped
}

func (in *Inbox) run(ctx context.Context, c *Client) {
	err := in.receive(ctx, c)
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	in.mu.Lock()
	in.err = err
	in.mu.Unlock()
	close(in.ch)
}

func (in *Inbox) receive(ctx context.Context, c *Client) error {
	stream, err := c.rpc.Receive(ctx, &transportpb.ReceiveRequest{})
	if err != nil {
		return fromStatus(c.name, "receive", err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return fromStatus(c.name, "receive", err)
		}
		e, err := wire.FromProto(resp.GetEnvelope())
		if err != nil {
			in.mu.Lock()
			in.dropped++
			in.mu.Unlock()
			c.log.Warn("dropped an invalid envelope", slog.String(LogKeyReason, err.Error()))
			continue
		}
		if e.Recipient != c.cfg.Name {
			c.log.Warn("dropped an envelope for another daemon", slog.Any(LogKeyEnvelope, e),
				slog.String(LogKeyReason, fmt.Sprintf("recipient %q is not %q", e.Recipient, c.cfg.Name)))
			continue
		}
		c.log.Debug("envelope received", slog.Any(LogKeyEnvelope, e))
		select {
		case in.ch <- e:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
