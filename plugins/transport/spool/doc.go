// Package spool is crffd's spool transport (the crff-transport-spool
// plugin): envelopes travel as files in a shared directory, for sites that
// can only exchange files (a shared or synchronised folder).
//
// The directory (option "dir", which must exist) holds one inbox folder
// per daemon, named by its federation name: DIR/<name>/. To send, a
// transport writes the signed envelope (see Authenticity) to a temporary
// file in the recipient's inbox (a dot file, which readers ignore), syncs
// it and renames it atomically to
//
//	<20-digit time stamp>-<sender>-<10-digit sequence>.env
//
// so that a reader never sees a partial envelope. Time stamps increase
// strictly per sender. Receive polls its own inbox (option "poll", a Go
// duration, default 200ms), delivers the files in name order, that is in
// order of sending, and then deletes them, or moves them to
// DIR/<name>/.archive/ with option archive=true. A file that fails any
// check (below) is moved to DIR/<name>/.rejected/ and logged at level warn
// with its path and the reason, never with payload values; the files after
// it are delivered as usual. Temporary files left by a writer that crashed
// are removed after an hour.
//
// # Authenticity
//
// Every file is signed with the sender's key from the federation PKI: the
// certificate files the grpc transport uses (transport.Config.TLS: the
// federation CA, the daemon's certificate and key, and the revocation
// list; see package certs). They are followed while the transport runs
// (certs.Reloader): a renewed certificate signs the next file sent, and a
// changed CA certificate or revocation list applies to the next file read.
// The transport refuses to start without the CA, certificate or key file,
// naming the one missing, with a certificate that names another daemon or
// is of the other role, or with its own certificate revoked; a site also
// needs Config.CoordinatorName.
//
// A signed file is, in this order:
//
//	Magic               the 22 bytes "crffd-spool-signed-v1\n"
//	uint32, big-endian  n, the certificate's length (1 to MaxCertificateBytes)
//	n bytes             the signer's X.509 certificate, DER
//	uint32, big-endian  m, the signature's length (1 to MaxSignatureBytes)
//	m bytes             the signature
//	the rest            the envelope as wire.Envelope.Marshal encodes it
//	                    (1 to wire.MaxEnvelopeBytes)
//
// The signature is over Magic followed by the envelope's bytes, made with
// the certificate's key: ECDSA over SHA-256 (an ASN.1 signature; crffd
// certs issues P-256 keys), Ed25519, or RSA PKCS #1 v1.5 over SHA-256.
// SignFile makes it; File.Verify checks it with crypto/x509. Covering the
// header too keeps a signature made for anything else from passing.
//
// A reader accepts a file only if its framing decodes (DecodeFile), the
// signature verifies with the certificate the file carries, that
// certificate chains to the federation CA, is valid now, is not on the
// revocation list and is of the role of this daemon's peers (a site hears
// only from a coordinator certificate, the coordinator only from site
// certificates; certs.Identity.Authenticate), and its federation name is
// both the sender the file name names and the envelope's sender. A site
// also accepts only Config.CoordinatorName as sender. Last, the envelope
// must decode and name this daemon as recipient. The capture option
// records the envelope's bytes of a signed file (the whole file when its
// framing does not decode).
//
// The signature does not cover the file name's time stamp and sequence
// number: whoever can write into an inbox can still replay or reorder
// genuine files, which wire.Tracker drops as stale or duplicate, and can
// delete files, which the round protocol's retries cover. The folder's
// permissions remain the first line of defence: only the daemons of the
// federation should write into the directory. Run them under accounts
// that share one group, with the directory owned by that group and setgid;
// inboxes are created with mode 0770 and files 0640 (less any umask).
//
// Option unsigned=true runs without certificates, as the spool did before
// files were signed: files are bare envelopes, neither signed nor checked,
// so anyone who can write into an inbox can send as any daemon. It is for
// tests and for folders nobody else can write to. The transport then
// warns at start, refuses certificate files given with the option, and
// refuses signed files, which it cannot check; a signing transport refuses
// bare envelopes, so all daemons of a federation must agree.
//
// # Options
//
// Besides transport.OptionCapture and transport.OptionLogLevel:
//
//	dir       the shared directory (required; it must exist)
//	poll      how often Receive looks into the inbox (a Go duration, default 200ms)
//	archive   true: keep delivered files in DIR/<name>/.archive/ instead of deleting them
//	unsigned  true: no signatures and no certificate files (see Authenticity)
//
// Unknown options are a configuration error.
//
// Delivery is at least once: a daemon that stops between delivering and
// deleting a file delivers it again; wire.Tracker drops the duplicate.
package spool
