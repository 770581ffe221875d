package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/crffd/crffd/federation/wire"
)

// Name returns the federation name of a certificate: its Subject
// CommonName, which must pass wire.CheckName. The error wraps ErrName.
func Name(cert *x509.Certificate) (string, error) {
	cn := cert.Subject.CommonName
	if err := wire.CheckName(cn); err != nil {
		return "", fmt.Errorf("certs: certificate CommonName: %w: %w", ErrName, err)
	}
	return cn, nil
}

// PeerName returns the federation name of the verified certificate a TLS
// peer presented. A connection without a verified chain is an ErrInvalid
// error.
func PeerName(cs tls.ConnectionState) (string, error) {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return "", fmt.Errorf("certs: peer presented no verified certificate: %w", ErrInvalid)
	}
	return Name(cs.VerifiedChains[0][0])
}

// Identity is a daemon's loaded certificate material.
type Identity struct {
	Name        string          // the certificate's federation name
	Certificate tls.Certificate // the daemon's certificate and key
	Pool        *x509.CertPool  // the federation CA
	Leaf        *x509.Certificate
}

// Load reads a daemon's files and checks that its certificate has a
// federation name, was issued by the federation CA for both server and
// client authentication, and matches the key.
func Load(f Files) (*Identity, error) {
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("certs: read CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("certs: %s holds no PEM certificate: %w", f.CA, ErrInvalid)
	}
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("certs: load %s and %s: %w: %w", f.Cert, f.Key, ErrInvalid, err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("certs: parse %s: %w: %w", f.Cert, ErrInvalid, err)
		}
	}
	name, err := Name(leaf)
	if err != nil {
		return nil, fmt.Errorf("certs: %s: %w", f.Cert, err)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			var unknown x509.UnknownAuthorityError
			if errors.As(err, &unknown) {
				return nil, fmt.Errorf("certs: %s was not issued by the federation CA in %s: %w: %w", f.Cert, f.CA, ErrInvalid, err)
			}
			return nil, fmt.Errorf("certs: %s: %w: %w", f.Cert, ErrInvalid, err)
		}
	}
	return &Identity{Name: name, Certificate: pair, Pool: pool, Leaf: leaf}, nil
}

// ServerConfig returns the TLS configuration of the coordinator: TLS 1.3
// only, its certificate from f, and client certificates required and
// verified against the federation CA.
func ServerConfig(f Files) (*tls.Config, error) {
	id, err := Load(f)
	if err != nil {
		return nil, err
	}
	return id.ServerConfig(), nil
}

// ClientConfig returns the TLS configuration of a site dialling the
// coordinator at serverName (a host name or IP address the coordinator's
// certificate names): TLS 1.3 only, its certificate from f, and the
// coordinator verified against the federation CA.
func ClientConfig(f Files, serverName string) (*tls.Config, error) {
	id, err := Load(f)
	if err != nil {
		return nil, err
	}
	return id.ClientConfig(serverName), nil
}

// ServerConfig returns the coordinator's TLS configuration for id.
func (id *Identity) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{id.Certificate},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    id.Pool,
	}
}

// ClientConfig returns a site's TLS configuration for id.
func (id *Identity) ClientConfig(serverName string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{id.Certificate},
		RootCAs:      id.Pool,
		ServerName:   serverName,
	}
}
