package transport

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-plugin"

	"github.com/crffd/crffd/certs"
	"github.com/crffd/crffd/federation/wire"
)

// Kind is the plugin kind of transport executables: crff-transport-<name>.
const Kind = "transport"

// pluginName is the key under which the transport is dispensed.
const pluginName = "transport"

// Handshake is the go-plugin handshake of transport plugins, protocol
// version 1. A binary built against another protocol version is refused at
// launch.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "CRFFD_TRANSPORT_PLUGIN",
	MagicCookieValue: "7e1b9c52-transport-envelopes-v1",
}

// Options every transport understands, in Config.Options.
const (
	// OptionCapture names a file to which the transport appends every
	// envelope it sends or receives, as encoded bytes (see Capture). For
	// tests that scan what crossed the wire; empty or absent for none.
	OptionCapture = "capture"
	// OptionLogLevel is the plugin's log level: debug, info (default),
	// warn or error.
	OptionLogLevel = "log_level"
)

// Sentinel errors. Errors from a Client wrap one of them, whichever side
// of the plugin boundary they arose on.
var (
	// ErrConfig reports an invalid or repeated configuration.
	ErrConfig = errors.New("invalid transport configuration")
	// ErrNotConfigured reports a Send or Receive before Configure.
	ErrNotConfigured = errors.New("transport not configured")
	// ErrSender reports an envelope whose sender is not this daemon.
	ErrSender = errors.New("envelope sender is not this daemon")
	// ErrRecipient reports an envelope for a recipient the transport
	// cannot reach in its role (for example a site addressing another site).
	ErrRecipient = errors.New("recipient not reachable by this transport")
	// ErrRefused reports that the peer refused the envelope, for example
	// because the sender named in it is not the name in the certificate
	// of the connection it came over.
	ErrRefused = errors.New("envelope refused by peer")
	// ErrUnavailable reports that the peer could not be reached before the
	// context ended.
	ErrUnavailable = errors.New("peer unavailable")
	// ErrQueueFull reports that too many envelopes wait for a peer.
	ErrQueueFull = errors.New("queue for peer is full")
	// ErrEnvelope reports an envelope that fails validation (package wire).
	ErrEnvelope = errors.New("invalid envelope")
)

// Role is the daemon's part in the federation.
type Role int

const (
	// RoleSite is a data holder: it dials the coordinator.
	RoleSite Role = 1
	// RoleCoordinator drives rounds: sites connect to it.
	RoleCoordinator Role = 2
)

// String returns "site" or "coordinator".
func (r Role) String() string {
	switch r {
	case RoleSite:
		return "site"
	case RoleCoordinator:
		return "coordinator"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// ParseRole returns the role named s ("site" or "coordinator").
func ParseRole(s string) (Role, error) {
	switch s {
	case "site":
		return RoleSite, nil
	case "coordinator":
		return RoleCoordinator, nil
	}
	return 0, fmt.Errorf("transport: role %q: want site or coordinator: %w", s, ErrConfig)
}

// Config is what a daemon tells its transport.
type Config struct {
	// Name is the daemon's federation name (wire.CheckName). Every envelope
	// it sends names it as sender; every envelope it receives names it as
	// recipient.
	Name string
	Role Role
	// Coordinator is host:port: the address the coordinator listens on
	// (port 0 picks a free port, see Client.Address), or the address a
	// site dials.
	Coordinator string
	// CoordinatorName is the coordinator's federation name. A transport
	// that authenticates peers accepts, at a site, only a coordinator
	// whose certificate carries it.
	CoordinatorName string
	// TLS names the daemon's certificate files (package certs), and the
	// federation's revocation list.
	TLS certs.Files
	// Options are settings of one transport, such as "dir" for the spool.
	Options map[string]string
}

// Check reports whether the fields every transport needs are valid.
func (c Config) Check() error {
	if err := wire.CheckName(c.Name); err != nil {
		return fmt.Errorf("transport: name: %w: %w", ErrConfig, err)
	}
	if c.Role != RoleSite && c.Role != RoleCoordinator {
		return fmt.Errorf("transport: %v: want site or coordinator: %w", c.Role, ErrConfig)
	}
	if c.CoordinatorName != "" {
		if err := wire.CheckName(c.CoordinatorName); err != nil {
			return fmt.Errorf("transport: coordinator name: %w: %w", ErrConfig, err)
		}
	}
	return nil
}

// Transport is what a transport plugin implements. The plugin's server
// checks requests before calling it (see the package documentation).
type Transport interface {
	// Configure checks cfg and starts the transport: a coordinator starts
	// listening, a site starts connecting in the background (the
	// coordinator need not be up yet). It returns the address it listens
	// on, or "" when it does not listen. It is called once.
	Configure(ctx context.Context, cfg Config) (address string, err error)
	// Send delivers e towards e.Recipient, or queues it for delivery, and
	// returns when the transport has taken responsibility for it. e is
	// valid and its sender is the configured name.
	Send(ctx context.Context, e *wire.Envelope) error
	// Receive calls deliver for each envelope addressed to this daemon, in
	// order of arrival, until ctx ends (it then returns ctx.Err()) or the
	// transport fails. When deliver returns an error, Receive keeps that
	// envelope for the next call and returns the error. Calls of Receive
	// never overlap.
	Receive(ctx context.Context, deliver func(*wire.Envelope) error) error
}
