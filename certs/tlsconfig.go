package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/crffd/crffd/ident"
)

// Name returns the federation name of a certificate: its Subject
// CommonName, which must pass ident.CheckName. The error wraps ErrName.
func Name(cert *x509.Certificate) (string, error) {
	cn := cert.Subject.CommonName
	if err := ident.CheckName(cn); err != nil {
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
	Role        Role            // what the certificate authenticates (RoleOf)
	Certificate tls.Certificate // the daemon's certificate and key
	Pool        *x509.CertPool  // the federation CA
	Leaf        *x509.Certificate
	revoked     map[string]bool // serial numbers in hex on the federation's revocation list
}

// Load reads a daemon's files and checks that its certificate has a
// federation name, was issued by the federation CA for TLS server or
// client authentication, matches the key and is not on the revocation list
// (ErrRevoked), if f names one. The list must be signed by the CA.
func Load(f Files) (*Identity, error) {
	id, err := load(f)
	if err != nil {
		return nil, err
	}
	return id, nil
}

// load is Load, except that with an ErrRevoked error it also returns the
// identity, whose revocation list a running daemon still needs.
func load(f Files) (*Identity, error) {
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
	role := RoleOf(leaf)
	if role < 0 {
		return nil, fmt.Errorf("certs: %s is for neither TLS server nor client authentication: %w", f.Cert, ErrInvalid)
	}
	chains, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
	if err != nil {
		var unknown x509.UnknownAuthorityError
		if errors.As(err, &unknown) {
			return nil, fmt.Errorf("certs: %s was not issued by the federation CA in %s: %w: %w", f.Cert, f.CA, ErrInvalid, err)
		}
		return nil, fmt.Errorf("certs: %s: %w: %w", f.Cert, ErrInvalid, err)
	}
	id := &Identity{Name: name, Role: role, Certificate: pair, Pool: pool, Leaf: leaf, revoked: map[string]bool{}}
	if f.CRL != "" {
		crl, err := readCRL(f.CRL, chains[0][len(chains[0])-1])
		if err != nil {
			return nil, err
		}
		id.revoked = revokedSet(crl)
	}
	if id.Revoked(leaf) {
		return id, fmt.Errorf("certs: %s (serial %s) is on the revocation list %s; renew it: %w", f.Cert, leaf.SerialNumber.Text(16), f.CRL, ErrRevoked)
	}
	return id, nil
}

// Revoked reports whether c is on the revocation list id was loaded with.
func (id *Identity) Revoked(c *x509.Certificate) bool {
	return id.revoked[c.SerialNumber.Text(16)]
}

// Can reports, as an ErrInvalid error, whether id's certificate cannot
// authenticate a daemon of role r.
func (id *Identity) Can(r Role) error {
	if id.Role == 0 || id.Role == r {
		return nil
	}
	return fmt.Errorf("certs: the certificate of %q is a %s certificate, not a %s's: issue one with crffd certs issue %s --role %s: %w",
		id.Name, id.Role, r, id.Name, r, ErrInvalid)
}

// verifyPeer refuses a peer whose certificate is on the revocation list.
func (id *Identity) verifyPeer(cs tls.ConnectionState) error {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return fmt.Errorf("certs: peer presented no verified certificate: %w", ErrInvalid)
	}
	if c := cs.VerifiedChains[0][0]; id.Revoked(c) {
		return fmt.Errorf("certs: the certificate of %q (serial %s) is on the federation's revocation list: %w", c.Subject.CommonName, c.SerialNumber.Text(16), ErrRevoked)
	}
	return nil
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
		// Runs after the chain is verified, on every handshake.
		VerifyConnection: id.verifyPeer,
	}
}

// ClientConfig returns a site's TLS configuration for id.
func (id *Identity) ClientConfig(serverName string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{id.Certificate},
		RootCAs:      id.Pool,
		ServerName:   serverName,
		// Runs after the chain and serverName are verified.
		VerifyConnection: id.verifyPeer,
	}
}
