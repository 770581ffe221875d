package kit_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/certs"
	"github.com/crffd/crffd/kit"
)

// newCA makes a federation CA in a fresh folder.
func newCA(t *testing.T) string { return newCAF(t) }

// newCAF is newCA for tests and fuzz targets.
func newCAF(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ca")
	if _, err := certs.InitCA(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSiteKit: a site's kit holds its certificate, the CA's, its
// configuration with the federation's keys filled in and the hospital's
// named as placeholders, and no secret; Verify accepts it.
func TestSiteKit(t *testing.T) {
	ca := newCA(t)
	out := filepath.Join(t.TempDir(), "hospital-a.tar.gz")
	if err := kit.WriteSite(ca, out, kit.Site{Name: "hospital-a", Coordinator: "coord.example.org:7443"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	rep, err := kit.Verify(out, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"site.db", "site.table", "site.id_column", "site.treatment_column", "site.outcome_column"}
	if rep.Name != "hospital-a" || rep.Role != certs.RoleSite || rep.Revocations || !slices.Equal(rep.Placeholders, want) {
		t.Errorf("report %+v; want hospital-a, a site, no revocation list, placeholders %v", rep, want)
	}
	if d := rep.DaysLeft(now); d < 85 || d > 90 {
		t.Errorf("%d days left, want about 90", d)
	}
	files := read(t, out)
	cfg := string(files["hospital-a/hospital-a.yaml"].data)
	for _, s := range []string{"address: coord.example.org:7443", "coordinator: coordinator", "cert: certs/hospital-a.crt", "CRFFD_FEDERATION_SECRET"} {
		if !strings.Contains(cfg, s) {
			t.Errorf("configuration lacks %q:\n%s", s, cfg)
		}
	}
	if strings.Contains(cfg, "secret:") {
		t.Errorf("a kit carries a secret:\n%s", cfg)
	}
	if m := files["hospital-a/certs/hospital-a.key"].mode; m != 0o600 {
		t.Errorf("key mode %04o, want 0600", m)
	}
	if err := kit.WriteSite(ca, out, kit.Site{Name: "hospital-a", Coordinator: "coord.example.org:7443"}); err == nil {
		t.Error("an existing archive was overwritten")
	}
}

// TestCoordinatorKit: the coordinator's kit names its sites and the
// address it listens on, with a certificate for the host sites dial; the
// CA's revocation list travels in every kit made after a revocation.
func TestCoordinatorKit(t *testing.T) {
	ca := newCA(t)
	dir := t.TempDir()
	if _, err := certs.Issue(ca, filepath.Join(dir, "old"), certs.Request{Name: "old-site", Role: certs.RoleSite}); err != nil {
		t.Fatal(err)
	}
	if _, err := certs.Revoke(ca, "old-site", nil); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "coordinator.tar.gz")
	if err := kit.WriteCoordinator(ca, out, kit.Coordinator{Address: "coord.example.org:7443", Sites: []string{"a", "b", "c"}}); err != nil {
		t.Fatal(err)
	}
	rep, err := kit.Verify(out, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Name != "coordinator" || rep.Role != certs.RoleCoordinator || !rep.Revocations || len(rep.Placeholders) != 0 {
		t.Errorf("report %+v", rep)
	}
	files := read(t, out)
	crt := files["coordinator/certs/coordinator.crt"].data
	id, err := certs.Load(certs.Files{CA: write(t, files["coordinator/certs/ca.crt"].data), Cert: write(t, crt), Key: write(t, files["coordinator/certs/coordinator.key"].data)})
	if err != nil || !slices.Contains(certs.Hosts(id.Leaf), "coord.example.org") {
		t.Errorf("coordinator certificate: %v, hosts %v", err, certs.Hosts(id.Leaf))
	}
	cfg := string(files["coordinator/coordinator.yaml"].data)
	if !strings.Contains(cfg, "- a\n") || !strings.Contains(cfg, "crl: certs/ca.crl") {
		t.Errorf("configuration:\n%s", cfg)
	}
}

// TestWriteRefuses: names, addresses and sites a kit cannot be made for.
func TestWriteRefuses(t *testing.T) {
	ca := newCA(t)
	dir := t.TempDir()
	for name, err := range map[string]error{
		"bad site name":          kit.WriteSite(ca, filepath.Join(dir, "1"), kit.Site{Name: "Bad Name", Coordinator: "h:1"}),
		"no coordinator port":    kit.WriteSite(ca, filepath.Join(dir, "2"), kit.Site{Name: "a", Coordinator: "h"}),
		"no coordinator host":    kit.WriteSite(ca, filepath.Join(dir, "3"), kit.Site{Name: "a", Coordinator: ":7443"}),
		"no CA":                  kit.WriteSite(filepath.Join(dir, "none"), filepath.Join(dir, "4"), kit.Site{Name: "a", Coordinator: "h:1"}),
		"coordinator no sites":   kit.WriteCoordinator(ca, filepath.Join(dir, "5"), kit.Coordinator{Address: "h:1"}),
		"coordinator bad site":   kit.WriteCoordinator(ca, filepath.Join(dir, "6"), kit.Coordinator{Address: "h:1", Sites: []string{"A B"}}),
		"coordinator no host":    kit.WriteCoordinator(ca, filepath.Join(dir, "7"), kit.Coordinator{Address: ":1", Sites: []string{"a"}}),
		"coordinator no address": kit.WriteCoordinator(ca, filepath.Join(dir, "8"), kit.Coordinator{Sites: []string{"a"}}),
	} {
		if err == nil {
			t.Errorf("%s: made", name)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("refused kits left %d files", len(ents))
	}
}

// TestVerifyRefuses: each way a kit can be wrong is named.
func TestVerifyRefuses(t *testing.T) {
	ca := newCA(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "a.tar.gz")
	if err := kit.WriteSite(ca, good, kit.Site{Name: "a", Coordinator: "h:1"}); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "b.tar.gz")
	if err := kit.WriteSite(ca, other, kit.Site{Name: "b", Coordinator: "h:1"}); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(dir, "foreign.tar.gz")
	if err := kit.WriteSite(newCA(t), foreign, kit.Site{Name: "a", Coordinator: "h:1"}); err != nil {
		t.Fatal(err)
	}
	b := read(t, other)
	f := read(t, foreign)
	for _, c := range []struct {
		name, want string
		edit       func(map[string]file)
		now        time.Time
	}{
		{"another site's key", "certificate", func(m map[string]file) { m["a/certs/a.key"] = file{b["b/certs/b.key"].data, 0o600} }, time.Time{}},
		{"another CA", "certificate", func(m map[string]file) { m["a/certs/ca.crt"] = f["a/certs/ca.crt"] }, time.Time{}},
		{"expired", "not now", nil, time.Now().Add(200 * 24 * time.Hour)},
		{"key readable by others", "0644", func(m map[string]file) { k := m["a/certs/a.key"]; k.mode = 0o644; m["a/certs/a.key"] = k }, time.Time{}},
		{"a file too many", "not part of a kit", func(m map[string]file) { m["a/run.sh"] = file{[]byte("rm -rf /"), 0o755} }, time.Time{}},
		{"a file missing", "README.md is missing", func(m map[string]file) { delete(m, "a/README.md") }, time.Time{}},
		{"outside the folder", "outside", func(m map[string]file) { m["b/x"] = file{[]byte("x"), 0o644} }, time.Time{}},
		{"a path up", "plain path", func(m map[string]file) { m["a/../../etc/passwd"] = file{[]byte("x"), 0o644} }, time.Time{}},
		{"another name", "site.name", func(m map[string]file) {
			y := m["a/a.yaml"]
			y.data = bytes.Replace(y.data, []byte("name: a"), []byte("name: b"), 1)
			m["a/a.yaml"] = y
		}, time.Time{}},
		{"a secret", "secret", func(m map[string]file) {
			y := m["a/a.yaml"]
			y.data = append(y.data, []byte("  secret: abc\n")...)
			m["a/a.yaml"] = y
		}, time.Time{}},
		{"not YAML", "a.yaml", func(m map[string]file) { m["a/a.yaml"] = file{[]byte("site: [\n"), 0o644} }, time.Time{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := read(t, good)
			if c.edit != nil {
				c.edit(m)
			}
			now := c.now
			if now.IsZero() {
				now = time.Now()
			}
			_, err := kit.VerifyReader(bytes.NewReader(pack(t, m)), now)
			if !errors.Is(err, kit.ErrKit) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want ErrKit saying %q", err, c.want)
			}
		})
	}
	// A kit made before its certificate was revoked fails once the CA's
	// list travels with it.
	if _, err := certs.Revoke(ca, "a", nil); err != nil {
		t.Fatal(err)
	}
	m := read(t, good)
	crl, err := os.ReadFile(filepath.Join(ca, certs.CRLFile))
	if err != nil {
		t.Fatal(err)
	}
	m["a/certs/ca.crl"] = file{crl, 0o644}
	if _, err := kit.VerifyReader(bytes.NewReader(pack(t, m)), time.Now()); !errors.Is(err, certs.ErrRevoked) {
		t.Errorf("revoked: err = %v, want ErrRevoked", err)
	}
	if _, err := kit.VerifyReader(strings.NewReader("not a kit"), time.Now()); !errors.Is(err, kit.ErrKit) {
		t.Errorf("not gzip: err = %v", err)
	}
	if _, err := kit.Verify(filepath.Join(dir, "missing.tar.gz"), time.Now()); err == nil {
		t.Error("a missing file verified")
	}
}

// file is an archive's file.
type file struct {
	data []byte
	mode int64
}

// read returns the files of the archive at path.
func read(t *testing.T, path string) map[string]file {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]file{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = file{b, h.Mode}
	}
}

// pack returns the files m as a gzip-compressed tar, in name order.
func pack(t *testing.T, m map[string]file) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	// The kit's folder first, as WriteSite writes it.
	if err := tw.WriteHeader(&tar.Header{Name: "a/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: m[n].mode, Size: int64(len(m[n].data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(m[n].data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// write writes b to a fresh file and returns its path.
func write(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
