// Package transport is the transport plugin interface of crffd: how
// envelopes (package federation/wire) travel between a coordinator and its
// sites.
//
// A transport plugin is a separate executable named crff-transport-<name>.
// The daemon launches it under hashicorp/go-plugin (gRPC, AutoMTLS,
// protocol version 1, see Handshake) with Open, which also configures it,
// and then talks to it through a Client:
//
//	c, err := transport.Open(ctx, transport.Options{Dir: dir, Name: "grpc", Config: cfg})
//	...
//	err = c.Send(ctx, envelope)             // to envelope.Recipient
//	in := c.Receive(ctx)                    // envelopes addressed to cfg.Name
//	for e := range in.C() { ... }
//	err = in.Err()
//
// A plugin implements Transport and calls Serve from main. The server side
// of this package checks every request before the implementation sees it:
// the configuration is complete, every envelope is valid (wire.FromProto),
// its sender is the configured name, and every envelope delivered by the
// implementation is addressed to that name. An implementation still checks
// what only it can: that the peer who sent an envelope is the sender the
// envelope names.
//
// Delivery is at least once: a transport may deliver an envelope twice
// (after a reconnect, a crash, a retry), and an envelope in flight when a
// daemon stops may be lost. The round protocol covers both: rounds are
// idempotent, duplicates are recognised by wire.Tracker, and a silent site
// is asked again.
//
// Errors crossing the plugin boundary keep their sentinel: a Client returns
// errors that wrap ErrConfig, ErrNotConfigured, ErrSender, ErrRecipient,
// ErrRefused, ErrUnavailable, ErrQueueFull or ErrEnvelope, so that a daemon
// can tell a refusal from an outage.
//
// Privacy: transports log headers, sizes and digests, never payload values
// (see wire.Envelope's LogValue). The capture option (OptionCapture) lets a
// test read every envelope a transport carried, as encoded bytes, to check
// that no row value is among them.
//
// Two transports are built in: crff-transport-grpc (package grpcnet:
// sites dial the coordinator over mutual TLS and hold a bidirectional
// stream) and crff-transport-spool (package spool: envelopes as files in a
// shared directory, each signed with the sender's certificate key). Both
// authenticate senders with the certificates of Config.TLS.
package transport
