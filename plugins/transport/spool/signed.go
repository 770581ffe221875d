package spool

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/crffd/crffd/federation/wire"
)

// Magic opens every signed spool file. It names the format and its
// version, and it is signed with the envelope, so that a signature made
// for anything else cannot pass for a spool file's.
const Magic = "crffd-spool-signed-v1\n"

// Limits of a signed file's parts.
const (
	// MaxCertificateBytes bounds the signer's certificate (DER). A
	// federation certificate is well under 1 KiB.
	MaxCertificateBytes = 16 << 10
	// MaxSignatureBytes bounds the signature (RSA-4096 needs 512 bytes).
	MaxSignatureBytes = 1 << 10
	// MaxFileBytes bounds a whole signed file.
	MaxFileBytes = len(Magic) + 4 + MaxCertificateBytes + 4 + MaxSignatureBytes + wire.MaxEnvelopeBytes
)

// ErrFormat reports bytes that are not a signed spool file.
var ErrFormat = errors.New("not a signed spool file")

// File is a decoded signed spool file. Its slices share the bytes it was
// decoded from.
type File struct {
	Certificate []byte // the signer's X.509 certificate, DER
	Signature   []byte // the signer's signature over Magic and Envelope
	Envelope    []byte // the encoded envelope (wire.Envelope.Marshal)
}

// DecodeFile splits a signed spool file into its parts (see the package
// documentation for the layout). It checks the framing only: that the
// certificate parses, chains to the federation CA and signed the envelope
// is for Verify and the receiver. Errors wrap ErrFormat.
func DecodeFile(b []byte) (*File, error) {
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%d bytes, more than %d: %w", len(b), MaxFileBytes, ErrFormat)
	}
	rest, ok := bytes.CutPrefix(b, []byte(Magic))
	if !ok {
		return nil, fmt.Errorf("no %q header (unsigned, or another format): %w", Magic[:len(Magic)-1], ErrFormat)
	}
	cert, rest, err := lengthPrefixed(rest, "certificate", MaxCertificateBytes)
	if err != nil {
		return nil, err
	}
	sig, rest, err := lengthPrefixed(rest, "signature", MaxSignatureBytes)
	if err != nil {
		return nil, err
	}
	if len(rest) == 0 {
		return nil, fmt.Errorf("no envelope after the signature: %w", ErrFormat)
	}
	if len(rest) > wire.MaxEnvelopeBytes {
		return nil, fmt.Errorf("envelope of %d bytes, more than %d: %w", len(rest), wire.MaxEnvelopeBytes, ErrFormat)
	}
	return &File{Certificate: cert, Signature: sig, Envelope: rest}, nil
}

// lengthPrefixed splits off a part of 1 to max bytes preceded by its
// length as a big-endian uint32.
func lengthPrefixed(b []byte, what string, max int) (part, rest []byte, err error) {
	if len(b) < 4 {
		return nil, nil, fmt.Errorf("truncated before the %s length: %w", what, ErrFormat)
	}
	n := binary.BigEndian.Uint32(b)
	switch {
	case n == 0:
		return nil, nil, fmt.Errorf("empty %s: %w", what, ErrFormat)
	case n > uint32(max):
		return nil, nil, fmt.Errorf("%s of %d bytes, more than %d: %w", what, n, max, ErrFormat)
	case uint64(n) > uint64(len(b)-4):
		return nil, nil, fmt.Errorf("truncated %s: %d of %d bytes: %w", what, len(b)-4, n, ErrFormat)
	}
	return b[4 : 4+n], b[4+n:], nil
}

// Encode returns the file's bytes.
func (f *File) Encode() []byte {
	out := make([]byte, 0, len(Magic)+8+len(f.Certificate)+len(f.Signature)+len(f.Envelope))
	out = append(out, Magic...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(f.Certificate)))
	out = append(out, f.Certificate...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(f.Signature)))
	out = append(out, f.Signature...)
	return append(out, f.Envelope...)
}

// signedMessage returns what a file's signature covers: Magic followed by
// the envelope's bytes.
func signedMessage(envelope []byte) []byte {
	return append(append(make([]byte, 0, len(Magic)+len(envelope)), Magic...), envelope...)
}

// Verify parses the file's certificate and checks that its key signed the
// file. It does not check the certificate itself (the federation CA,
// validity, role, revocation: certs.Identity.Authenticate does).
func (f *File) Verify() (*x509.Certificate, error) {
	cert, err := x509.ParseCertificate(f.Certificate)
	if err != nil {
		return nil, fmt.Errorf("parse the signer's certificate: %w", err)
	}
	alg, err := signatureAlgorithm(cert.PublicKeyAlgorithm)
	if err != nil {
		return cert, err
	}
	if err := cert.CheckSignature(alg, signedMessage(f.Envelope), f.Signature); err != nil {
		return cert, fmt.Errorf("the signature does not verify with the certificate of %q (serial %s): %w",
			cert.Subject.CommonName, cert.SerialNumber.Text(16), err)
	}
	return cert, nil
}

// signatureAlgorithm returns the algorithm a spool file is signed with for
// a key of algorithm a.
func signatureAlgorithm(a x509.PublicKeyAlgorithm) (x509.SignatureAlgorithm, error) {
	switch a {
	case x509.ECDSA:
		return x509.ECDSAWithSHA256, nil
	case x509.Ed25519:
		return x509.PureEd25519, nil
	case x509.RSA:
		return x509.SHA256WithRSA, nil
	}
	return 0, fmt.Errorf("the signer's key is %v: want ECDSA, Ed25519 or RSA", a)
}

// SignFile signs an encoded envelope with the daemon's certificate and key
// (certs.Identity.Certificate) and returns the signed file: an ECDSA key
// signs a SHA-256 digest (ASN.1 signature), an Ed25519 key the message
// itself, an RSA key a SHA-256 digest with PKCS #1 v1.5.
func SignFile(cert tls.Certificate, envelope []byte) ([]byte, error) {
	if len(cert.Certificate) == 0 {
		return nil, errors.New("spool: sign: no certificate")
	}
	if len(envelope) == 0 || len(envelope) > wire.MaxEnvelopeBytes {
		return nil, fmt.Errorf("spool: sign: envelope of %d bytes: want 1 to %d", len(envelope), wire.MaxEnvelopeBytes)
	}
	if n := len(cert.Certificate[0]); n > MaxCertificateBytes {
		return nil, fmt.Errorf("spool: sign: certificate of %d bytes, more than %d", n, MaxCertificateBytes)
	}
	signer, ok := cert.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("spool: sign: the private key (%T) cannot sign", cert.PrivateKey)
	}
	msg := signedMessage(envelope)
	var sig []byte
	var err error
	switch signer.Public().(type) {
	case *ecdsa.PublicKey, *rsa.PublicKey:
		digest := sha256.Sum256(msg)
		sig, err = signer.Sign(rand.Reader, digest[:], crypto.SHA256)
	case ed25519.PublicKey:
		sig, err = signer.Sign(rand.Reader, msg, crypto.Hash(0))
	default:
		return nil, fmt.Errorf("spool: sign: the private key is %T: want ECDSA, Ed25519 or RSA", signer.Public())
	}
	if err != nil {
		return nil, fmt.Errorf("spool: sign: %w", err)
	}
	if len(sig) > MaxSignatureBytes {
		return nil, fmt.Errorf("spool: sign: signature of %d bytes, more than %d", len(sig), MaxSignatureBytes)
	}
	f := &File{Certificate: cert.Certificate[0], Signature: sig, Envelope: envelope}
	return f.Encode(), nil
}
