// Package certs makes and loads the certificates of a crffd federation.
//
// A federation has one certificate authority (InitCA), kept by whoever
// runs the federation, and one certificate per daemon, site or coordinator
// (Issue). Every certificate carries ExtKeyUsage ServerAuth and ClientAuth:
// the coordinator serves TLS, sites authenticate as TLS clients, and the
// same files work in either role. Keys are ECDSA P-256 in PKCS #8 PEM and
// are written with mode 0600. Nothing is ever overwritten, except by Renew,
// which replaces a daemon's certificate and key with new ones from the
// same CA, one atomic rename per file.
//
// # Names
//
// A certificate's federation name is its Subject CommonName, which must be
// a valid federation name (ident.CheckName: lower-case letters, digits, '.',
// '_', '-'). Issue sets it to the name asked for. Transports compare it
// with the sender named in every envelope that arrives over a connection
// authenticated by that certificate. The DNS and IP subject alternative
// names only say where the holder can be reached, for TLS host name
// verification of the coordinator; they play no part in identity.
// Identity.Authenticate applies the checks of a handshake (the federation
// CA, validity, role, name, revocation list) to a certificate presented
// outside TLS, such as the signer of a spool file.
//
// # Files
//
// For a daemon named NAME the files are ca.crt (the federation CA),
// NAME.crt and NAME.key, which Issue writes into one folder that an
// operator copies to the daemon's host. The CA key ca.key never leaves the
// CA folder. ServerConfig and ClientConfig build the *tls.Config of the
// coordinator (TLS 1.3, client certificates required and verified against
// the federation CA) and of a site from those files.
//
// # Renewal
//
// A daemon runs for months, longer than one should wait to replace a
// certificate. Reloader holds a daemon's material and reads the files
// again when they change on disk (time, size or inode), so that its
// ServerConfig and ClientConfig hand the renewed certificate to the next
// handshake without a restart. Files that do not load, or whose
// certificate names another daemon, are reported and not used; the last
// good certificate stays.
package certs
