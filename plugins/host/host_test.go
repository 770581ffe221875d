package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-plugin"
)

func writeExe(t *testing.T, dir, name string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestListAndFind(t *testing.T) {
	dir := t.TempDir()
	writeExe(t, dir, "crff-kernel-zeta", 0o755)
	writeExe(t, dir, "crff-kernel-alpha", 0o755)
	writeExe(t, dir, "crff-kernel-noexec", 0o644)
	writeExe(t, dir, "crff-transport-grpc", 0o755)
	writeExe(t, dir, "crff-kernel-", 0o755)
	writeExe(t, dir, "README", 0o644)
	if err := os.Mkdir(filepath.Join(dir, "crff-kernel-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := List(dir, "kernel")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range got {
		names = append(names, b.Name)
	}
	if strings.Join(names, ",") != "alpha,zeta" {
		t.Errorf("List = %v, want [alpha zeta]", names)
	}
	for _, tc := range []struct{ name, want string }{
		{"missing", "no executable " + filepath.Join(dir, "crff-kernel-missing")},
		{"noexec", "is not an executable file"},
		{"dir", "is not an executable file"},
		{"../etc", "plugin name"},
		{"", "plugin name"},
	} {
		_, err := Find(dir, "kernel", tc.name)
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Find(%q) = %v, want ErrNotFound containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := List(filepath.Join(dir, "absent"), "kernel"); err == nil {
		t.Error("List of a missing directory succeeded")
	}
}

func TestCheckPin(t *testing.T) {
	dir := t.TempDir()
	p := writeExe(t, dir, "crff-kernel-x", 0o755)
	sum, err := SHA256(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckPin(p, strings.ToUpper(sum)); err != nil {
		t.Errorf("matching pin (upper case): %v", err)
	}
	wrong := strings.Repeat("0", 64)
	err = CheckPin(p, wrong)
	if !errors.Is(err, ErrHashMismatch) || !strings.Contains(err.Error(), sum) || !strings.Contains(err.Error(), wrong) {
		t.Errorf("wrong pin: err = %v, want ErrHashMismatch naming %s and %s", err, sum, wrong)
	}
	if err := CheckPin(p, "abc"); err == nil || !strings.Contains(err.Error(), "not 64 hex digits") {
		t.Errorf("malformed pin: err = %v", err)
	}
	// Launch refuses a mismatching binary before starting it.
	_, _, err = Launch(context.Background(), Config{Binary: Binary{Kind: "kernel", Name: "x", Path: p}, Pin: wrong}, "kernel")
	if !errors.Is(err, ErrHashMismatch) {
		t.Errorf("Launch with wrong pin: err = %v, want ErrHashMismatch", err)
	}
}

// TestPluginEnvironmentIsAllowListed launches a "plugin" that writes its
// environment to a file and exits: it must see PATH and the locale, and
// none of crffd's own variables, the federation secret above all.
func TestPluginEnvironmentIsAllowListed(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "env.txt")
	p := filepath.Join(dir, "crff-kernel-envdump")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n/usr/bin/env > '"+out+"'\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CRFFD_FEDERATION_SECRET", "sentinel-secret-0x5eed")
	t.Setenv("CRFFD_SITE_DB", "sentinel-site.sqlite")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "sentinel-aws")
	t.Setenv("LC_NUMERIC", "C")
	cfg := Config{Binary: Binary{Kind: "kernel", Name: "envdump", Path: p},
		Handshake: plugin.HandshakeConfig{ProtocolVersion: 1, MagicCookieKey: "CRFF_TEST", MagicCookieValue: "x"}}
	if _, _, err := Launch(context.Background(), cfg, "kernel"); err == nil {
		t.Fatal("a plugin that exits at once launched")
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	env := string(b)
	for _, leak := range []string{"sentinel-secret-0x5eed", "sentinel-site.sqlite", "sentinel-aws", "CRFFD_"} {
		if strings.Contains(env, leak) {
			t.Errorf("the plugin's environment holds %q:\n%s", leak, env)
		}
	}
	for _, want := range []string{"PATH=" + os.Getenv("PATH") + "\n", "LC_NUMERIC=C\n", "CRFF_TEST=x\n"} {
		if !strings.Contains(env, want) {
			t.Errorf("the plugin's environment lacks %q:\n%s", want, env)
		}
	}
}

func TestPluginEnv(t *testing.T) {
	got := PluginEnv([]string{"PATH=/bin", "HOME=/h", "CRFFD_FEDERATION_SECRET=s", "LC_TIME=C", "LCX=1", "TMPDIR=/t", "PATHX=1", "=weird"})
	if want := []string{"PATH=/bin", "HOME=/h", "LC_TIME=C", "TMPDIR=/t"}; !slices.Equal(got, want) {
		t.Errorf("PluginEnv = %q, want %q", got, want)
	}
}
