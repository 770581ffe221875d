package certs

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Revocation is what Revoke did.
type Revocation struct {
	File string // the CA's revocation list, ca.crl in its folder
	// Serials are the serial numbers of the certificates of the name,
	// including those revoked before.
	Serials []*big.Int
	Entries int // certificates on the list in all
}

// record keeps a copy of a certificate the CA in caDir issued, for Revoke.
func record(caDir, name string, der []byte) error {
	dir := filepath.Join(caDir, issuedDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("certs: create %s: %w", dir, err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return fmt.Errorf("certs: parse new certificate: %w", err)
	}
	path := filepath.Join(dir, name+"-"+c.SerialNumber.Text(16)+".crt")
	return writeNew(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// issuedTo returns the certificates the CA in caDir issued to name.
func issuedTo(caDir, name string) ([]*x509.Certificate, error) {
	paths, err := filepath.Glob(filepath.Join(caDir, issuedDir, name+"-*.crt"))
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	var out []*x509.Certificate
	for _, p := range paths {
		c, err := readCert(p)
		if err != nil {
			return nil, err
		}
		if c.Subject.CommonName == name { // not a name with a dash after it
			out = append(out, c)
		}
	}
	return out, nil
}

// Revoke puts every certificate the CA in caDir issued to name on the
// federation's revocation list, caDir/ca.crl, signed by the CA, and keeps
// what the list held before. certFiles add certificates the CA has no copy
// of (issued by an older crffd); each must be the CA's and name name. The
// list is replaced atomically. Daemons read it from Files.CRL: copy it
// beside each daemon's ca.crt, where a running daemon picks it up within
// seconds, refuses new connections from revoked certificates, and the
// coordinator drops those open. A certificate issued to name after the
// revocation (Renew, or Issue once the old files are removed) is valid.
func Revoke(caDir, name string, certFiles []string) (*Revocation, error) {
	if err := checkLeafName(name); err != nil {
		return nil, err
	}
	ca, caKey, err := loadCA(caDir)
	if err != nil {
		return nil, err
	}
	certs, err := issuedTo(caDir, name)
	if err != nil {
		return nil, err
	}
	for _, p := range certFiles {
		c, err := readCert(p)
		if err != nil {
			return nil, err
		}
		if err := c.CheckSignatureFrom(ca); err != nil {
			return nil, fmt.Errorf("certs: %s was not issued by the CA in %s: %w: %w", p, caDir, ErrInvalid, err)
		}
		if c.Subject.CommonName != name {
			return nil, fmt.Errorf("certs: %s names %q, not %q: %w", p, c.Subject.CommonName, name, ErrName)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("certs: revoke %q: the CA in %s has issued it no certificate (pass an older one's file): %w", name, caDir, ErrNotIssued)
	}
	path := filepath.Join(caDir, CRLFile)
	old, err := readCRL(path, ca)
	if err != nil {
		return nil, err
	}
	list := &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: time.Now(), NextUpdate: ca.NotAfter}
	if old != nil {
		list.Number = new(big.Int).Add(old.Number, big.NewInt(1))
		list.RevokedCertificateEntries = old.RevokedCertificateEntries
	}
	rev := &Revocation{File: path}
	for _, c := range certs {
		rev.Serials = append(rev.Serials, c.SerialNumber)
		if !slices.ContainsFunc(list.RevokedCertificateEntries, func(e x509.RevocationListEntry) bool { return e.SerialNumber.Cmp(c.SerialNumber) == 0 }) {
			list.RevokedCertificateEntries = append(list.RevokedCertificateEntries, x509.RevocationListEntry{SerialNumber: c.SerialNumber, RevocationTime: list.ThisUpdate})
		}
	}
	rev.Entries = len(list.RevokedCertificateEntries)
	der, err := x509.CreateRevocationList(rand.Reader, list, ca, caKey)
	if err != nil {
		return nil, fmt.Errorf("certs: sign revocation list: %w", err)
	}
	tmp, err := writeTemp(path, pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}), 0o644)
	if err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("certs: replace %s: %w", path, err)
	}
	return rev, syncDir(caDir)
}

// readCRL reads the revocation list at path and checks that the CA ca
// signed it. A missing file is no list: nil and no error.
func readCRL(path string, ca *x509.Certificate) (*x509.RevocationList, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("certs: read revocation list: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "X509 CRL" {
		return nil, fmt.Errorf("certs: %s holds no PEM revocation list: %w", path, ErrInvalid)
	}
	l, err := x509.ParseRevocationList(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certs: parse %s: %w: %w", path, ErrInvalid, err)
	}
	if err := l.CheckSignatureFrom(ca); err != nil {
		return nil, fmt.Errorf("certs: %s was not signed by the federation CA: %w: %w", path, ErrInvalid, err)
	}
	return l, nil
}

// revokedSet returns the serial numbers on a revocation list, in hex.
func revokedSet(l *x509.RevocationList) map[string]bool {
	set := map[string]bool{}
	if l != nil {
		for _, e := range l.RevokedCertificateEntries {
			set[e.SerialNumber.Text(16)] = true
		}
	}
	return set
}

// SerialsText lists the serial numbers of r.Serials in hex.
func (r *Revocation) SerialsText() string {
	out := make([]string, len(r.Serials))
	for i, s := range r.Serials {
		out[i] = s.Text(16)
	}
	return strings.Join(out, ", ")
}
