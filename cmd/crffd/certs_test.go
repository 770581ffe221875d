package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crffd/crffd/certs"
)

func TestCertsCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	if _, err := execute(t, "certs", "init", "--dir", dir); err != nil {
		t.Fatal(err)
	}
	if _, err := execute(t, "certs", "issue", "hospital-a", "--dir", dir, "--out", filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.crt", "ca.key", "a/hospital-a.crt", "a/hospital-a.key"} {
		info, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".key") && info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, info.Mode().Perm())
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"certs", "init", "--dir", dir}, "refusing to overwrite"},
		{[]string{"certs", "issue", "hospital-a", "--dir", dir, "--out", filepath.Join(dir, "a")}, "refusing to overwrite"},
		{[]string{"certs", "issue", "Bad Name", "--dir", dir}, "invalid certificate name"},
		{[]string{"certs", "issue", "b", "--dir", filepath.Join(dir, "missing")}, "missing"},
		{[]string{"certs", "issue", "b", "--dir", dir, "--host", "b.example.org"}, "a site's certificate names no host"},
		{[]string{"certs", "issue", "b", "--dir", dir, "--role", "server"}, "want site or coordinator"},
		{[]string{"certs", "issue", "b", "--dir", dir, "--days", "-1"}, "want a positive number of days"},
	} {
		_, err := execute(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
}

// TestCertsRenew replaces a certificate with certs renew: a new key, the
// old role and host names unless --role or --host is given, and the errors
// of a renewal that cannot be made.
func TestCertsRenew(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	out := filepath.Join(dir, "coord")
	if _, err := execute(t, "certs", "init", "--dir", dir); err != nil {
		t.Fatal(err)
	}
	if _, err := execute(t, "certs", "issue", "coordinator", "--role", "coordinator", "--dir", dir, "--out", out, "--host", "coord.example.org"); err != nil {
		t.Fatal(err)
	}
	files := certs.FilesIn(out, "coordinator")
	oldKey, _ := os.ReadFile(files.Key)
	first, err := certs.Load(files)
	if err != nil {
		t.Fatal(err)
	}
	a, err := execute(t, "certs", "renew", "coordinator", "--dir", dir, "--out", out)
	if err != nil {
		t.Fatal(err)
	}
	if got := a.stdout.(*bytes.Buffer).String(); !strings.Contains(got, "coordinator: renewed "+files.Cert) {
		t.Errorf("output %q", got)
	}
	renewed, err := certs.Load(files)
	if err != nil {
		t.Fatal(err)
	}
	newKey, _ := os.ReadFile(files.Key)
	if bytes.Equal(oldKey, newKey) || renewed.Leaf.SerialNumber.Cmp(first.Leaf.SerialNumber) == 0 {
		t.Error("renew kept the old key or serial number")
	}
	if d := renewed.Leaf.DNSNames; len(d) != 1 || d[0] != "coord.example.org" || len(renewed.Leaf.IPAddresses) != 0 {
		t.Errorf("renewed certificate names %v %v, want the old coord.example.org", d, renewed.Leaf.IPAddresses)
	}
	if info, err := os.Stat(files.Key); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("renewed key: %v, %v; want mode 0600", info, err)
	}
	if _, err := execute(t, "certs", "renew", "coordinator", "--dir", dir, "--out", out, "--host", "10.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if again, err := certs.Load(files); err != nil || len(again.Leaf.DNSNames) != 0 || len(again.Leaf.IPAddresses) != 1 {
		t.Errorf("renew --host 10.0.0.1: %v, %v", again.Leaf, err)
	}
	left, _ := filepath.Glob(filepath.Join(out, ".*tmp*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	current, _ := os.ReadFile(files.Key)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"certs", "renew", "coordinator", "--dir", filepath.Join(dir, "missing"), "--out", out}, "read certificate"},
		{[]string{"certs", "renew", "site-x", "--dir", dir, "--out", out}, "site-x.crt does not exist: no such certificate; issue one first"},
		{[]string{"certs", "renew", "ca", "--dir", dir}, "reserved"},
		{[]string{"certs", "renew", "coordinator", "--dir", dir, "--out", out, "--role", "site", "--host", "10.0.0.2"}, "names no host"},
	} {
		_, err := execute(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
	if after, _ := os.ReadFile(files.Key); !bytes.Equal(after, current) {
		t.Error("a failed renewal changed the key")
	}
}

// TestCertsRevoke revokes a site's certificates with certs revoke, writes
// ca.crl, and a daemon loading the revoked certificate with that list
// refuses it.
func TestCertsRevoke(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	out := filepath.Join(dir, "a")
	if _, err := execute(t, "certs", "init", "--dir", dir); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"certs", "issue", "hospital-a", "--dir", dir, "--out", out},
		{"certs", "renew", "hospital-a", "--dir", dir, "--out", out},
	} {
		if _, err := execute(t, args...); err != nil {
			t.Fatal(err)
		}
	}
	a, err := execute(t, "certs", "revoke", "hospital-a", "--dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	crl := filepath.Join(dir, certs.CRLFile)
	if got := a.stdout.(*bytes.Buffer).String(); !strings.Contains(got, "hospital-a: 2 certificate(s) revoked") || !strings.Contains(got, crl+" lists 2") {
		t.Errorf("output %q", got)
	}
	f := certs.FilesIn(out, "hospital-a")
	f.CRL = crl
	if _, err := certs.Load(f); !errors.Is(err, certs.ErrRevoked) {
		t.Errorf("Load of the revoked certificate: %v", err)
	}
	if _, err := execute(t, "certs", "revoke", "hospital-b", "--dir", dir); err == nil || !strings.Contains(err.Error(), "has issued it no certificate") {
		t.Errorf("revoke of a name never issued: %v", err)
	}
}
