// Package certs makes and loads the certificates of a crffd federation.
//
// A federation has one certificate authority (InitCA), kept by whoever
// runs the federation, and one certificate per daemon, site or coordinator
// (Issue). Every certificate carries ExtKeyUsage ServerAuth and ClientAuth:
// the coordinator serves TLS, sites authenticate as TLS clients, and the
// same files work in either role. Keys are ECDSA P-256 in PKCS #8 PEM and
// are written with mode 0600; nothing is ever overwritten.
//
// # Names
//
// A certificate's federation name is its Subject CommonName, which must be
// a valid federation name (wire.CheckName: lower-case letters, digits, '.',
// '_', '-'). Issue sets it to the name asked for. Transports compare it
// with the sender named in every envelope that arrives over a connection
// authenticated by that certificate. The DNS and IP subject alternative
// names only say where the holder can be reached, for TLS host name
// verification of the coordinator; they play no part in identity.
//
// # Files
//
// For a daemon named NAME the files are ca.crt (the federation CA),
// NAME.crt and NAME.key, which Issue writes into one folder that an
// operator copies to the daemon's host. The CA key ca.key never leaves the
// CA folder. ServerConfig and ClientConfig build the *tls.Config of the
// coordinator (TLS 1.3, client certificates required and verified against
// the federation CA) and of a site from those files.
package certs
