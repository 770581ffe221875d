package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	} {
		_, err := execute(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
}
