package e2e

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFederationFromKits: a federation made only from start-up kits
// (crffd kit for the coordinator and each of three sites, each unpacked
// into a folder of its own, its placeholders set and the sites' secret in
// their environment) completes over loopback, and every site has the
// global ATE.
func TestFederationFromKits(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	crffd(t, nil, "simulate", "--sources", "3", "--rows", "300", "--format", "sqlite", "--out", data).mustSucceed(t)
	ca := filepath.Join(dir, "ca")
	crffd(t, nil, "certs", "init", "--dir", ca).mustSucceed(t)

	// The address the kits name: a port free a moment ago.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	sites := []string{"site1", "site2", "site3"}
	kits := filepath.Join(dir, "kits")
	crffd(t, nil, "kit", "coordinator", "--ca-dir", ca, "--address", addr, "--sites", strings.Join(sites, ","),
		"--out", filepath.Join(kits, "coordinator.tar.gz")).mustSucceed(t)
	for _, s := range sites {
		crffd(t, nil, "kit", "site", s, "--ca-dir", ca, "--coordinator", addr, "--out", filepath.Join(kits, s+".tar.gz")).mustSucceed(t)
	}
	hosts := filepath.Join(dir, "hosts")
	for _, name := range append([]string{"coordinator"}, sites...) {
		archive := filepath.Join(kits, name+".tar.gz")
		v := crffd(t, nil, "kit", "verify", archive)
		v.mustSucceed(t)
		left := "nothing left to set"
		if name != "coordinator" {
			left = "site.db, site.table, site.id_column, site.treatment_column, site.outcome_column"
		}
		if !strings.Contains(v.stdout, left) {
			t.Errorf("kit verify %s:\n%s", name, v.stdout)
		}
		untar(t, archive, filepath.Join(hosts, name))
	}

	// What only the hospital knows: its file, table and columns.
	for _, s := range sites {
		cfg := filepath.Join(hosts, s, s, s+".yaml")
		b, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for key, value := range map[string]string{"db": filepath.Join(data, s+".sqlite"), "table": "records",
			"id_column": "id", "treatment_column": "w", "outcome_column": "y"} {
			text = setPlaceholder(t, text, key, value)
		}
		for _, l := range strings.Split(text, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "#") && strings.Contains(l, "SET-ME") {
				t.Fatalf("%s still has a placeholder: %s", cfg, l)
			}
		}
		if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	coordCfg := filepath.Join(hosts, "coordinator", "coordinator", "coordinator.yaml")
	f, err := os.OpenFile(coordCfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(fedModel); err != nil {
		t.Fatal(err)
	}
	f.Close()

	coord := startDaemon(t, "coordinator", "coordinator", "--config", coordCfg, "--once")
	waitLogged(t, coord, "coordinator listening")
	secret := []string{"CRFFD_FEDERATION_SECRET=the sites' own secret, never the coordinator's"}
	var ds []*daemon
	for _, s := range sites {
		ds = append(ds, startDaemonEnv(t, s, secret, "site", "--config", filepath.Join(hosts, s, s, s+".yaml"), "--once"))
	}
	coord.mustSucceed(t, 3*time.Minute)
	for _, d := range ds {
		d.mustSucceed(t, time.Minute)
	}
	for _, s := range sites {
		db := openDB(t, filepath.Join(data, s+".sqlite"))
		if n := queryFloat(t, db, `SELECT count(*) FROM crff_ate WHERE scope = 'global' AND estimator = 'aipw'`); n != 1 {
			t.Errorf("%s: %v global ATEs, want 1", s, n)
		}
	}
}

// setPlaceholder sets the YAML key whose value is a placeholder.
func setPlaceholder(t *testing.T, text, key, value string) string {
	t.Helper()
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), key+": ") && strings.Contains(l, "SET-ME") {
			lines[i] = l[:strings.Index(l, key+":")] + fmt.Sprintf("%s: %q", key, value)
			return strings.Join(lines, "\n")
		}
	}
	t.Fatalf("no placeholder for %s in:\n%s", key, text)
	return ""
}

// untar unpacks the gzip-compressed tar archive into dir.
func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, os.FileMode(h.Mode)|0o700); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		w, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, os.FileMode(h.Mode))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(w, tr); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
}
