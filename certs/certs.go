package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/crffd/crffd/ident"
)

// File names and validity periods.
const (
	// CACertFile and CAKeyFile are the CA's files in its folder.
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
	// CRLFile is the CA's certificate revocation list (Revoke), in its
	// folder and, copied there, beside each daemon's ca.crt.
	CRLFile = "ca.crl"
	// issuedDir is the folder of the CA that keeps a copy of every
	// certificate it issued, so that Revoke finds their serial numbers.
	issuedDir = "issued"
	// CAValidity is how long a new CA is valid.
	CAValidity = 10 * 365 * 24 * time.Hour
	// CertValidity is how long an issued certificate is valid by default,
	// at most until the CA expires. Renewal needs no restart (Reloader),
	// so a short life costs little and bounds how long a stolen key is of
	// use when nobody revokes it.
	CertValidity = 90 * 24 * time.Hour
	// caCommonName is the subject of every federation CA.
	caCommonName = "crffd federation CA"
	// clockSkew backdates certificates so that a peer whose clock runs
	// slightly behind accepts them at once.
	clockSkew = time.Hour
)

// Role is what a certificate authenticates.
type Role int

const (
	// RoleSite certificates authenticate TLS clients only and name no
	// host: a site dials out and never serves, so its certificate cannot
	// stand in for the coordinator's.
	RoleSite Role = iota + 1
	// RoleCoordinator certificates authenticate the TLS server sites dial,
	// at the host names and addresses they carry.
	RoleCoordinator
)

func (r Role) String() string {
	switch r {
	case RoleSite:
		return "site"
	case RoleCoordinator:
		return "coordinator"
	case 0:
		return "site and coordinator (issued by an older crffd)"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// ParseRole returns the role named "site" or "coordinator".
func ParseRole(s string) (Role, error) {
	switch s {
	case "site":
		return RoleSite, nil
	case "coordinator":
		return RoleCoordinator, nil
	}
	return 0, fmt.Errorf("certs: role %q: want site or coordinator: %w", s, ErrInvalid)
}

// usage is the extended key usage of a role.
func (r Role) usage() x509.ExtKeyUsage {
	if r == RoleCoordinator {
		return x509.ExtKeyUsageServerAuth
	}
	return x509.ExtKeyUsageClientAuth
}

// RoleOf returns the role of a certificate from its extended key usages:
// 0 for a certificate that has both, as crffd issued before roles existed,
// and -1 for one that has neither.
func RoleOf(c *x509.Certificate) Role {
	var server, client bool
	for _, u := range c.ExtKeyUsage {
		server = server || u == x509.ExtKeyUsageServerAuth
		client = client || u == x509.ExtKeyUsageClientAuth
	}
	switch {
	case server && client:
		return 0
	case server:
		return RoleCoordinator
	case client:
		return RoleSite
	}
	return -1
}

// Request is what Issue and Renew sign.
type Request struct {
	Name string // the daemon's federation name
	Role Role   // RoleSite or RoleCoordinator; for Renew, 0 keeps the old one's
	// Hosts are the DNS names and IP addresses a coordinator's certificate
	// is valid for: the addresses sites dial. A site's has none. For Renew,
	// nil keeps the old certificate's.
	Hosts []string
	// Validity is how long the certificate is valid; 0 means
	// CertValidity. It never outlives the CA.
	Validity time.Duration
}

// Sentinel errors returned, wrapped with detail, by this package.
var (
	// ErrExists reports that a file to be written exists already.
	ErrExists = errors.New("file exists; refusing to overwrite it")
	// ErrInvalid reports a certificate, key or CA that cannot be used.
	ErrInvalid = errors.New("invalid certificate material")
	// ErrName reports a certificate name that is not a federation name.
	ErrName = errors.New("invalid certificate name")
	// ErrNotIssued reports a certificate to renew or revoke that does not
	// exist.
	ErrNotIssued = errors.New("no such certificate; issue one first")
	// ErrRevoked reports a certificate on the federation's revocation list.
	ErrRevoked = errors.New("certificate revoked")
)

// Files names a daemon's certificate files.
type Files struct {
	CA   string // the federation CA certificate (ca.crt)
	Cert string // the daemon's certificate (NAME.crt)
	Key  string // the daemon's private key (NAME.key)
	// CRL is the federation's revocation list (ca.crl), or "" for none. A
	// missing file revokes nothing, so that one can be added later to a
	// running daemon.
	CRL string
}

// FilesIn returns the files Issue writes for name into dir.
func FilesIn(dir, name string) Files {
	return Files{
		CA:   filepath.Join(dir, CACertFile),
		Cert: filepath.Join(dir, name+".crt"),
		Key:  filepath.Join(dir, name+".key"),
		CRL:  filepath.Join(dir, CRLFile),
	}
}

// Issued describes a certificate written by InitCA or Issue.
type Issued struct {
	Certificate *x509.Certificate
	CertFile    string
	KeyFile     string
}

// InitCA creates a federation CA in dir (created with mode 0700 if
// missing): ca.crt and ca.key. It refuses, with ErrExists, if either file
// exists.
func InitCA(dir string) (*Issued, error) {
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("certs: create CA folder: %w", err)
	}
	if err := refuseExisting(certPath, keyPath); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: generate CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: caCommonName, Organization: []string{"crffd"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("certs: sign CA certificate: %w", err)
	}
	return writePair(der, key, certPath, keyPath)
}

// Issue signs a certificate for req with the CA in caDir and writes
// outDir/NAME.crt and outDir/NAME.key (outDir is created with mode 0700 if
// missing), and a copy of ca.crt when outDir is another folder, so that
// outDir holds everything the daemon needs. The certificate has CommonName
// NAME. A site's (RoleSite) has ExtKeyUsage ClientAuth and no host; a
// coordinator's (RoleCoordinator) has ServerAuth and a DNS or IP subject
// alternative name per host, which must be the addresses sites dial. The
// CA keeps a copy in its folder, for Revoke. Issue refuses, with
// ErrExists, to overwrite a file; Renew replaces them.
func Issue(caDir, outDir string, req Request) (*Issued, error) {
	if err := checkLeafName(req.Name); err != nil {
		return nil, err
	}
	ca, caKey, err := loadCA(caDir)
	if err != nil {
		return nil, err
	}
	tmpl, err := leafTemplate(req, ca)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(outDir, 0o700); err != nil {
		return nil, fmt.Errorf("certs: create output folder: %w", err)
	}
	f := FilesIn(outDir, req.Name)
	if err := refuseExisting(f.Cert, f.Key); err != nil {
		return nil, err
	}
	if err := copyCA(ca, f.CA); err != nil {
		return nil, err
	}
	der, key, err := signLeaf(req.Name, tmpl, ca, caKey)
	if err != nil {
		return nil, err
	}
	if err := record(caDir, req.Name, der); err != nil {
		return nil, err
	}
	return writePair(der, key, f.Cert, f.Key)
}

// Renew issues a new certificate and key for req.Name with the CA in
// caDir, as Issue does, and replaces outDir/NAME.crt and outDir/NAME.key,
// which a running daemon then picks up (Reloader). The certificate to
// renew must exist (ErrNotIssued otherwise). A zero req.Role and nil
// req.Hosts keep the old certificate's, so that renewing the coordinator's
// does not drop the host names sites dial; a certificate of an older crffd,
// valid for both roles, needs its role said. Each file is written to a
// temporary file in outDir, synced and renamed over the old one, so that a
// reader sees either the old file or the new one, never a partly written
// one; the key keeps mode 0600. outDir's ca.crt must be the CA's
// certificate (ErrExists otherwise).
func Renew(caDir, outDir string, req Request) (*Issued, error) {
	if err := checkLeafName(req.Name); err != nil {
		return nil, err
	}
	ca, caKey, err := loadCA(caDir)
	if err != nil {
		return nil, err
	}
	f := FilesIn(outDir, req.Name)
	old, err := readCert(f.Cert)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("certs: renew %q: %s does not exist: %w", req.Name, f.Cert, ErrNotIssued)
	}
	if err != nil {
		return nil, err
	}
	if req.Role == 0 {
		if req.Role = RoleOf(old); req.Role <= 0 {
			return nil, fmt.Errorf("certs: renew %q: %s is valid for %s; say which role the new one is for: %w", req.Name, f.Cert, req.Role, ErrInvalid)
		}
	}
	if req.Hosts == nil && req.Role == RoleCoordinator {
		req.Hosts = Hosts(old)
	}
	tmpl, err := leafTemplate(req, ca)
	if err != nil {
		return nil, err
	}
	if err := copyCA(ca, f.CA); err != nil {
		return nil, err
	}
	der, key, err := signLeaf(req.Name, tmpl, ca, caKey)
	if err != nil {
		return nil, err
	}
	if err := record(caDir, req.Name, der); err != nil {
		return nil, err
	}
	return replacePair(der, key, f.Cert, f.Key)
}

// checkLeafName checks the name of a daemon's certificate.
func checkLeafName(name string) error {
	if err := ident.CheckName(name); err != nil {
		return fmt.Errorf("certs: %w: %w", ErrName, err)
	}
	if name == "ca" {
		return fmt.Errorf("certs: name %q is reserved for the CA's files: %w", name, ErrName)
	}
	return nil
}

// signLeaf makes a key for name and signs its certificate with the CA.
func signLeaf(name string, tmpl, ca *x509.Certificate, caKey crypto.Signer) ([]byte, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: generate key for %q: %w", name, err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: sign certificate for %q: %w", name, err)
	}
	return der, key, nil
}

// Hosts returns the DNS names and IP addresses a certificate is valid
// for, as Request.Hosts takes them.
func Hosts(c *x509.Certificate) []string {
	hosts := append([]string{}, c.DNSNames...)
	for _, ip := range c.IPAddresses {
		hosts = append(hosts, ip.String())
	}
	return hosts
}

// leafTemplate returns the certificate template of a daemon.
func leafTemplate(req Request, ca *x509.Certificate) (*x509.Certificate, error) {
	switch {
	case req.Role != RoleSite && req.Role != RoleCoordinator:
		return nil, fmt.Errorf("certs: %q: role %v: want site or coordinator: %w", req.Name, req.Role, ErrInvalid)
	case req.Role == RoleSite && len(req.Hosts) > 0:
		return nil, fmt.Errorf("certs: %q: a site's certificate names no host (sites only dial out), got %q: %w", req.Name, req.Hosts, ErrInvalid)
	case req.Role == RoleCoordinator && len(req.Hosts) == 0:
		return nil, fmt.Errorf("certs: %q: the coordinator's certificate needs the host names or addresses sites dial: %w", req.Name, ErrInvalid)
	case req.Validity < 0:
		return nil, fmt.Errorf("certs: %q: validity %v: want a positive duration: %w", req.Name, req.Validity, ErrInvalid)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	validity := req.Validity
	if validity == 0 {
		validity = CertValidity
	}
	now := time.Now()
	notAfter := now.Add(validity)
	if ca.NotAfter.Before(notAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: req.Name, Organization: []string{"crffd federation"}},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{req.Role.usage()},
	}
	for _, h := range req.Hosts {
		switch ip := net.ParseIP(h); {
		case ip != nil:
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		case h == "":
			return nil, fmt.Errorf("certs: empty host name for %q: %w", req.Name, ErrInvalid)
		default:
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return tmpl, nil
}

// loadCA reads and checks the CA certificate and key in dir.
func loadCA(dir string) (*x509.Certificate, crypto.Signer, error) {
	cert, err := readCert(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, nil, err
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, nil, fmt.Errorf("certs: %s is not a CA certificate: %w", filepath.Join(dir, CACertFile), ErrInvalid)
	}
	keyPath := filepath.Join(dir, CAKeyFile)
	b, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: read CA key: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, nil, fmt.Errorf("certs: %s holds no PKCS #8 private key: %w", keyPath, ErrInvalid)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: parse %s: %w: %w", keyPath, ErrInvalid, err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("certs: %s is not a signing key: %w", keyPath, ErrInvalid)
	}
	if pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(cert.PublicKey) {
		return nil, nil, fmt.Errorf("certs: %s does not belong to %s: %w", keyPath, filepath.Join(dir, CACertFile), ErrInvalid)
	}
	return cert, signer, nil
}

// readCert reads the first certificate of a PEM file.
func readCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("certs: read certificate: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("certs: %s holds no PEM certificate: %w", path, ErrInvalid)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certs: parse %s: %w: %w", path, ErrInvalid, err)
	}
	return c, nil
}

// copyCA writes the CA certificate to path unless the same certificate is
// there already; a different certificate is an ErrExists error.
func copyCA(ca *x509.Certificate, path string) error {
	if have, err := os.ReadFile(path); err == nil {
		blk, _ := pem.Decode(have)
		if blk != nil && bytes.Equal(blk.Bytes, ca.Raw) {
			return nil
		}
		return fmt.Errorf("certs: %s holds another CA certificate: %w", path, ErrExists)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("certs: %w", err)
	}
	return writeNew(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}), 0o644)
}

// encodePair returns a new certificate and the PEM of it and of its key.
func encodePair(der []byte, key *ecdsa.PrivateKey) (cert *x509.Certificate, certPEM, keyPEM []byte, err error) {
	cert, err = x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("certs: parse new certificate: %w", err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("certs: encode key: %w", err)
	}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), nil
}

// writePair writes a certificate and its key, removing both if either
// cannot be written.
func writePair(der []byte, key *ecdsa.PrivateKey, certPath, keyPath string) (*Issued, error) {
	cert, certPEM, keyPEM, err := encodePair(der, key)
	if err != nil {
		return nil, err
	}
	if err := writeNew(keyPath, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := writeNew(certPath, certPEM, 0o644); err != nil {
		os.Remove(keyPath)
		return nil, err
	}
	return &Issued{Certificate: cert, CertFile: certPath, KeyFile: keyPath}, nil
}

// replacePair replaces a certificate and its key. Both are written and
// synced to temporary files before either is renamed into place, so that
// a daemon reading them (Reloader) sees a mismatched pair for no longer
// than two renames take.
func replacePair(der []byte, key *ecdsa.PrivateKey, certPath, keyPath string) (*Issued, error) {
	cert, certPEM, keyPEM, err := encodePair(der, key)
	if err != nil {
		return nil, err
	}
	keyTmp, err := writeTemp(keyPath, keyPEM, 0o600)
	if err != nil {
		return nil, err
	}
	certTmp, err := writeTemp(certPath, certPEM, 0o644)
	if err != nil {
		os.Remove(keyTmp)
		return nil, err
	}
	if err := os.Rename(keyTmp, keyPath); err != nil {
		os.Remove(keyTmp)
		os.Remove(certTmp)
		return nil, fmt.Errorf("certs: replace %s: %w", keyPath, err)
	}
	if err := os.Rename(certTmp, certPath); err != nil {
		os.Remove(certTmp)
		return nil, fmt.Errorf("certs: %s is new but %s could not be replaced, so they do not match; renew again: %w", keyPath, certPath, err)
	}
	if err := syncDir(filepath.Dir(keyPath)); err != nil {
		return nil, err
	}
	if filepath.Dir(certPath) != filepath.Dir(keyPath) {
		if err := syncDir(filepath.Dir(certPath)); err != nil {
			return nil, err
		}
	}
	return &Issued{Certificate: cert, CertFile: certPath, KeyFile: keyPath}, nil
}

// writeTemp writes data with perm to a new temporary file beside path,
// synced, and returns its name. A temporary file that cannot be written
// is removed.
func writeTemp(path string, data []byte, perm os.FileMode) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("certs: %w", err)
	}
	err = f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("certs: write %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}

// syncDir makes the renames in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("certs: sync %s: %w", dir, err)
	}
	return nil
}

// refuseExisting returns an ErrExists error naming the first path that exists.
func refuseExisting(paths ...string) error {
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("certs: %s: %w", p, ErrExists)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("certs: %w", err)
		}
	}
	return nil
}

// writeNew creates path with perm and writes data, failing with ErrExists
// if it exists. A partly written file is removed.
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("certs: %s: %w", path, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("certs: write %s: %w", path, err)
	}
	return nil
}

// newSerial returns a random 128-bit serial number.
func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("certs: serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}
