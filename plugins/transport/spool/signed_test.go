package spool_test

import (
	"bytes"
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/binary"
	"errors"
	"io"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/plugins/transport/spool"
)

// selfSigned returns a certificate for pub signed by signer (a
// self-signed one when pub is signer's).
func selfSigned(t testing.TB, pub any, signer crypto.Signer) []byte {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "site-a"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, signer)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// keyPair returns a certificate and key of the kind named.
func keyPair(t testing.TB, kind string) tls.Certificate {
	t.Helper()
	var key crypto.Signer
	var err error
	switch kind {
	case "ecdsa":
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ed25519":
		_, key, err = ed25519.GenerateKey(rand.Reader)
	case "rsa":
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{selfSigned(t, key.Public(), key)}, PrivateKey: key}
}

func testEnvelope(t testing.TB) []byte {
	t.Helper()
	e, err := wire.New(wire.Header{RunID: "run-1", Round: 1, Kind: wire.KindWeights, Sender: "site-a", Recipient: "coordinator"},
		[]wire.Tensor{wire.Scalar("x", 1)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSignVerify(t *testing.T) {
	envelope := testEnvelope(t)
	for _, kind := range []string{"ecdsa", "ed25519", "rsa"} {
		t.Run(kind, func(t *testing.T) {
			kp := keyPair(t, kind)
			b, err := spool.SignFile(kp, envelope)
			if err != nil {
				t.Fatal(err)
			}
			f, err := spool.DecodeFile(b)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(f.Envelope, envelope) || !bytes.Equal(f.Certificate, kp.Certificate[0]) || !bytes.Equal(f.Encode(), b) {
				t.Error("decoded parts differ from those signed")
			}
			if c, err := f.Verify(); err != nil || c.Subject.CommonName != "site-a" {
				t.Errorf("Verify: %v", err)
			}
			// The signature covers the header too: the same signature over
			// the bare envelope does not verify.
			var alg x509.SignatureAlgorithm
			switch kind {
			case "ecdsa":
				alg = x509.ECDSAWithSHA256
			case "ed25519":
				alg = x509.PureEd25519
			case "rsa":
				alg = x509.SHA256WithRSA
			}
			c, _ := x509.ParseCertificate(f.Certificate)
			if err := c.CheckSignature(alg, envelope, f.Signature); err == nil {
				t.Error("the signature verifies without the header")
			}
		})
	}
}

// fakeSigner is a signer whose key is of no kind a spool file supports.
type fakeSigner struct{}

func (fakeSigner) Public() crypto.PublicKey                                  { return "key" }
func (fakeSigner) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) { return nil, nil }

// failingSigner refuses to sign.
type failingSigner struct{ crypto.Signer }

func (failingSigner) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) {
	return nil, errors.New("token removed")
}

func TestSignFileErrors(t *testing.T) {
	kp := keyPair(t, "ecdsa")
	envelope := testEnvelope(t)
	huge := tls.Certificate{Certificate: [][]byte{make([]byte, spool.MaxCertificateBytes+1)}, PrivateKey: kp.PrivateKey}
	for _, tc := range []struct {
		name     string
		cert     tls.Certificate
		envelope []byte
		msg      string
	}{
		{"no certificate", tls.Certificate{PrivateKey: kp.PrivateKey}, envelope, "no certificate"},
		{"empty envelope", kp, nil, "envelope of 0 bytes"},
		{"huge envelope", kp, make([]byte, wire.MaxEnvelopeBytes+1), "want 1 to"},
		{"huge certificate", huge, envelope, "more than"},
		{"no signer", tls.Certificate{Certificate: kp.Certificate, PrivateKey: "key"}, envelope, "cannot sign"},
		{"unsupported key", tls.Certificate{Certificate: kp.Certificate, PrivateKey: fakeSigner{}}, envelope, "want ECDSA, Ed25519 or RSA"},
		{"signer fails", tls.Certificate{Certificate: kp.Certificate, PrivateKey: failingSigner{kp.PrivateKey.(crypto.Signer)}}, envelope, "token removed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := spool.SignFile(tc.cert, tc.envelope); err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("SignFile: %v, want an error containing %q", err, tc.msg)
			}
		})
	}
}

func TestVerifyErrors(t *testing.T) {
	envelope := testEnvelope(t)
	good, err := spool.DecodeFile(must(spool.SignFile(keyPair(t, "ecdsa"), envelope)))
	if err != nil {
		t.Fatal(err)
	}
	// A certificate for an X25519 key, which cannot sign: crypto/x509
	// makes none, so an ECDSA one gets its public key replaced.
	xkey, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	spki, err := x509.MarshalPKIXPublicKey(xkey.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	parts := derChildren(t, good.Certificate)
	tbs := derChildren(t, parts[0].FullBytes)
	tbs[6].FullBytes = spki // version, serial, algorithm, issuer, validity, subject, key
	parts[0].FullBytes = derSequence(t, tbs)
	x25519 := derSequence(t, parts)
	if c, err := x509.ParseCertificate(x25519); err != nil || c.PublicKeyAlgorithm != x509.UnknownPublicKeyAlgorithm {
		t.Fatalf("X25519 certificate: %v", err)
	}
	for _, tc := range []struct {
		name string
		f    spool.File
		msg  string
	}{
		{"junk certificate", spool.File{Certificate: []byte("junk"), Signature: good.Signature, Envelope: envelope}, "parse the signer's certificate"},
		{"key that cannot sign", spool.File{Certificate: x25519, Signature: good.Signature, Envelope: envelope}, "want ECDSA, Ed25519 or RSA"},
		{"tampered envelope", spool.File{Certificate: good.Certificate, Signature: good.Signature, Envelope: append([]byte{0}, envelope...)}, "does not verify"},
		{"junk signature", spool.File{Certificate: good.Certificate, Signature: []byte("junk"), Envelope: envelope}, "does not verify"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.f.Verify(); err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Verify: %v, want an error containing %q", err, tc.msg)
			}
		})
	}
}

// derChildren returns the elements of a DER SEQUENCE.
func derChildren(t *testing.T, der []byte) []asn1.RawValue {
	t.Helper()
	var seq asn1.RawValue
	if _, err := asn1.Unmarshal(der, &seq); err != nil {
		t.Fatal(err)
	}
	var out []asn1.RawValue
	for rest := seq.Bytes; len(rest) > 0; {
		var v asn1.RawValue
		var err error
		if rest, err = asn1.Unmarshal(rest, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// derSequence encodes elements as a DER SEQUENCE.
func derSequence(t *testing.T, elems []asn1.RawValue) []byte {
	t.Helper()
	var body []byte
	for _, e := range elems {
		body = append(body, e.FullBytes...)
	}
	b, err := asn1.Marshal(asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagSequence, IsCompound: true, Bytes: body})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// frame builds a file from raw parts: lengths as given, whatever the parts.
func frame(certLen uint32, cert []byte, sigLen uint32, sig, envelope []byte) []byte {
	b := []byte(spool.Magic)
	b = binary.BigEndian.AppendUint32(b, certLen)
	b = append(b, cert...)
	b = binary.BigEndian.AppendUint32(b, sigLen)
	b = append(b, sig...)
	return append(b, envelope...)
}

func TestDecodeFileErrors(t *testing.T) {
	cert, sig, env := []byte("cert"), []byte("sig"), []byte("envelope")
	bigEnvelope := frame(4, cert, 3, sig, make([]byte, wire.MaxEnvelopeBytes+1))
	for _, tc := range []struct {
		name string
		b    []byte
		msg  string
	}{
		{"empty", nil, "no \"crffd-spool-signed-v1\" header"},
		{"bare envelope", env, "no \"crffd-spool-signed-v1\" header"},
		{"header only", []byte(spool.Magic), "truncated before the certificate length"},
		{"empty certificate", frame(0, nil, 3, sig, env), "empty certificate"},
		{"huge certificate", frame(spool.MaxCertificateBytes+1, cert, 3, sig, env), "certificate of 16385 bytes, more than 16384"},
		{"truncated certificate", frame(100, cert, 3, sig, nil)[:len(spool.Magic)+10], "truncated certificate: 6 of 100 bytes"},
		{"no signature length", frame(4, cert, 0, nil, nil)[:len(spool.Magic)+8], "truncated before the signature length"},
		{"empty signature", frame(4, cert, 0, nil, env), "empty signature"},
		{"huge signature", frame(4, cert, spool.MaxSignatureBytes+1, sig, env), "signature of 1025 bytes, more than 1024"},
		{"truncated signature", frame(4, cert, 50, sig, nil), "truncated signature: 3 of 50 bytes"},
		{"no envelope", frame(4, cert, 3, sig, nil), "no envelope after the signature"},
		{"huge envelope", bigEnvelope, "more than 67108864"},
		{"huge file", append(bigEnvelope, make([]byte, spool.MaxFileBytes)...), "bytes, more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := spool.DecodeFile(tc.b)
			if !errors.Is(err, spool.ErrFormat) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("DecodeFile: %v, want ErrFormat containing %q", err, tc.msg)
			}
		})
	}
	f, err := spool.DecodeFile(frame(4, cert, 3, sig, env))
	if err != nil || string(f.Certificate) != "cert" || string(f.Signature) != "sig" || string(f.Envelope) != "envelope" {
		t.Errorf("DecodeFile: %+v, %v", f, err)
	}
}

// FuzzDecodeFile checks that DecodeFile never panics, that what it
// accepts encodes back to the same bytes, and that Verify of anything it
// accepts returns rather than panics.
func FuzzDecodeFile(f *testing.F) {
	envelope := testEnvelope(f)
	for _, kind := range []string{"ecdsa", "ed25519"} {
		f.Add(must(spool.SignFile(keyPair(f, kind), envelope)))
	}
	f.Add([]byte(spool.Magic))
	f.Add(frame(4, []byte("cert"), 3, []byte("sig"), []byte("envelope")))
	f.Add(frame(0xffffffff, nil, 0, nil, nil))
	f.Add(envelope)
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := spool.DecodeFile(b)
		if err != nil {
			if !errors.Is(err, spool.ErrFormat) {
				t.Fatalf("error without ErrFormat: %v", err)
			}
			return
		}
		if len(file.Certificate) == 0 || len(file.Signature) == 0 || len(file.Envelope) == 0 {
			t.Fatalf("accepted an empty part: %d %d %d", len(file.Certificate), len(file.Signature), len(file.Envelope))
		}
		if !bytes.Equal(file.Encode(), b) {
			t.Fatal("Encode(DecodeFile(b)) != b")
		}
		file.Verify()
	})
}
