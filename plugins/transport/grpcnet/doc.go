// Package grpcnet is crffd's grpc transport (the crff-transport-grpc
// plugin): daemons talk gRPC over mutually authenticated TLS 1.3.
//
// The coordinator's transport listens on Config.Coordinator. Each site's
// transport dials out to it and holds one bidirectional stream (netpb.Relay
// Connect), over which envelopes flow both ways; the coordinator never
// dials a site, so sites need no inbound connections. A site that loses
// its connection reconnects with backoff and gets its stream back.
//
// # Identity
//
// Both ends present certificates issued by the federation CA (package
// certs): the coordinator one for TLS server authentication, each site one
// for client authentication only, and a transport refuses to start with a
// certificate of the other role. The coordinator requires and verifies
// client certificates; a certificate from another CA fails the TLS
// handshake, which the coordinator logs with the reason. A site accepts
// only a server whose certificate carries Config.CoordinatorName, besides
// the host name it dialled, so that no other certificate of the federation
// can stand in for the coordinator. A peer's federation name is its
// certificate's Subject CommonName, and it must equal the sender named in
// every envelope that peer sends: the coordinator refuses, logs and
// answers with the reason any envelope from a site whose certificate names
// someone else, and a site likewise refuses envelopes whose sender is not
// its coordinator. A transport also refuses to start when its own
// certificate's name differs from its configured name.
//
// # Revocation
//
// Config.TLS.CRL names the federation's revocation list (crffd certs
// revoke), which is followed like the certificate files. Both ends refuse
// a handshake with a revoked certificate, and when the list changes the
// coordinator closes the streams of sites whose certificate it now
// revokes.
//
// # Certificate renewal
//
// A transport follows its certificate files (certs.Reloader) rather than
// reading them once: every TLS handshake uses the files current at that
// time, and every 10 seconds the files are checked for a change, so that
// `crffd certs renew NAME` takes effect without restarting the
// daemon. A site then reconnects at once, presenting its new certificate
// and trusting the CAs now in ca.crt; the coordinator presents its new
// certificate to each connection made from then on, and verifies sites
// against the CAs now in ca.crt. A change is logged at level warn with the
// new certificate's serial number. New files that do not load, or whose
// certificate names another daemon, are logged at level error and not
// used: the last good certificate stays until the files are fixed. Both
// ends log, at level info, the serial number of the certificate the peer
// presented ("site connected", "connected to the coordinator").
//
// # Delivery
//
// The coordinator queues envelopes per site (Send returns once queued) and
// keeps each until the site acknowledges it; a site that reconnects is sent
// every unacknowledged envelope again, in order. A site's Send returns when
// the coordinator's transport has accepted the envelope, or with
// transport.ErrRefused and the coordinator's reason, or with
// transport.ErrUnavailable and the last connection error when the context
// ends first. Delivery is therefore at least once; wire.Tracker drops the
// duplicates. Received envelopes wait in a bounded inbox until the daemon
// receives them; a full inbox holds back its sender.
//
// # Options
//
// Besides transport.OptionCapture and transport.OptionLogLevel:
//
//	server_name       (site) the TLS server name to verify; default: the host
//	                  of the coordinator address
//	queue             envelopes queued per peer and in the inbox (default 1024)
//	reconnect_max     (site) longest pause between connection attempts
//	                  (a Go duration, default 5s)
//
// Unknown options are a configuration error.
package grpcnet
