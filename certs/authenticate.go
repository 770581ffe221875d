package certs

import (
	"crypto/x509"
	"errors"
	"fmt"
	"time"
)

// Authenticate checks a certificate that a peer presented outside a TLS
// handshake, such as the signer of a spool file, as a handshake with id
// would: it must chain to the federation CA in id.Pool, be valid at now,
// be for role (its extended key usage; a certificate valid for both roles,
// as an older crffd issued, is accepted for either, and one valid for
// neither is refused), carry a federation name, and not be on id's
// revocation list. It returns that name. Errors wrap ErrInvalid, ErrName
// or ErrRevoked and name the certificate by its CommonName and serial
// number.
func (id *Identity) Authenticate(c *x509.Certificate, role Role, now time.Time) (string, error) {
	if c == nil {
		return "", fmt.Errorf("certs: no certificate: %w", ErrInvalid)
	}
	if role != RoleSite && role != RoleCoordinator {
		return "", fmt.Errorf("certs: role %v: want site or coordinator: %w", role, ErrInvalid)
	}
	who := fmt.Sprintf("the certificate of %q (serial %s)", c.Subject.CommonName, c.SerialNumber.Text(16))
	// The role is checked below, with a clearer message than Verify's.
	_, err := c.Verify(x509.VerifyOptions{Roots: id.Pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		var unknown x509.UnknownAuthorityError
		if errors.As(err, &unknown) {
			return "", fmt.Errorf("certs: %s was not issued by the federation CA: %w: %w", who, ErrInvalid, err)
		}
		return "", fmt.Errorf("certs: %s: %w: %w", who, ErrInvalid, err)
	}
	if have := RoleOf(c); have != 0 && have != role {
		if have < 0 {
			return "", fmt.Errorf("certs: %s is for neither TLS server nor client authentication, not a %s's: %w", who, role, ErrInvalid)
		}
		return "", fmt.Errorf("certs: %s is a %s certificate, not a %s's: %w", who, have, role, ErrInvalid)
	}
	name, err := Name(c)
	if err != nil {
		return "", fmt.Errorf("certs: %s: %w", who, err)
	}
	if id.Revoked(c) {
		return "", fmt.Errorf("certs: %s is on the federation's revocation list: %w", who, ErrRevoked)
	}
	return name, nil
}
