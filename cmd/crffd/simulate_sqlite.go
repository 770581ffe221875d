package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/crffd/crffd/certs"

	"github.com/crffd/crffd/dataset"
	"github.com/crffd/crffd/store"
	"github.com/crffd/crffd/synth"
)

// Tables that crffd simulate writes into each site file. The records table
// is what a site's configuration points at; the truth table holds the
// simulated ground truth, for checking estimates, and is never read by
// training.
const (
	simRecordsTable = "records"
	simTruthTable   = "truth"
)

// writeSiteFile writes one source as a site file: the records (id, w, y,
// then the covariates, named by names, or x1..xd when names is nil) and the
// truth (id, mu0, mu1, y_cfactual). An existing file is refused rather than
// mixed with new data.
func writeSiteFile(ctx context.Context, path string, t *dataset.Table, names []string) error {
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("simulate: %s already exists; choose an empty --out directory", path)
	}
	if names != nil && len(names) != t.Covariates() {
		return fmt.Errorf("simulate: %s: %d covariate names for %d covariates", path, len(names), t.Covariates())
	}
	site, err := store.Open(ctx, path, store.Options{Create: true})
	if err != nil {
		return err
	}
	defer site.Close()
	n, dx := t.X.Dims()
	cols := []store.Column{{Name: "id", Type: store.Integer}, {Name: "w", Type: store.Integer}, {Name: "y", Type: store.Real}}
	for j := 1; j <= dx; j++ {
		name := fmt.Sprintf("x%d", j)
		if names != nil {
			name = names[j-1]
		}
		cols = append(cols, store.Column{Name: name, Type: store.Real})
	}
	rows := make([][]any, n)
	truth := make([][]any, n)
	for i := range rows {
		r := make([]any, 0, len(cols))
		r = append(r, int64(i+1), int64(t.W[i]), t.Y[i])
		for _, v := range t.X.RawRowView(i) {
			r = append(r, v)
		}
		rows[i] = r
		truth[i] = []any{int64(i + 1), t.Mu0[i], t.Mu1[i], t.YCF[i]}
	}
	if err := site.CreateTable(ctx, simRecordsTable, cols, rows, false); err != nil {
		return err
	}
	truthCols := []store.Column{{Name: "id", Type: store.Integer}, {Name: "mu0", Type: store.Real}, {Name: "mu1", Type: store.Real}, {Name: "y_cfactual", Type: store.Real}}
	return site.CreateTable(ctx, simTruthTable, truthCols, truth, false)
}

// siteConfig is the ready single-site configuration written beside a
// simulated site file. Paths in a configuration are relative to the file.
func siteConfig(name, dbFile string, binary bool) string {
	outcome := "continuous"
	if binary {
		outcome = "binary"
	}
	return fmt.Sprintf(`# Site %[1]s, written by crffd simulate. Fit it alone with:
#   crffd fit --config %[1]s.yaml
site:
  name: %[1]s
  db: %[2]s
  table: %[3]s
  id_column: id
  treatment_column: w
  outcome_column: y
  outcome_type: %[4]s
  on_invalid: refuse
kernel:
  name: gaussian
`, name, dbFile, simRecordsTable, outcome)
}

// privacyBounds returns the privacy section of a simulated site's
// configuration: the design's public column ranges (synth.Design.Bounds),
// which a private site needs for its moments, and no budget, so that
// adding epsilon under privacy makes the site private. Empty without
// bounds.
func privacyBounds(bounds map[string]synth.Bound) string {
	if len(bounds) == 0 {
		return ""
	}
	names := slices.Sorted(maps.Keys(bounds))
	var b strings.Builder
	b.WriteString("# Add epsilon (the site's budget) under privacy to make the site private;\n")
	b.WriteString("# bounds are the simulated design's public column ranges (docs/privacy.md).\n")
	b.WriteString("privacy:\n  bounds:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "    %s: [%g, %g]\n", n, bounds[n].Lo, bounds[n].Hi)
	}
	return b.String()
}

// writeSiteFiles writes siteK.sqlite and siteK.yaml for every source, with
// the covariates named by names (nil: x1..xd) and the outcome declared
// binary or continuous.
func writeSiteFiles(ctx context.Context, dir string, tables []*dataset.Table, binary bool, names []string, bounds map[string]synth.Bound) ([]string, error) {
	var paths []string
	for k, t := range tables {
		name := fmt.Sprintf("site%d", k+1)
		db := filepath.Join(dir, name+".sqlite")
		if err := writeSiteFile(ctx, db, t, names); err != nil {
			return nil, err
		}
		cfg := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(cfg, []byte(siteConfig(name, name+".sqlite", binary)+privacyBounds(bounds)), 0o644); err != nil {
			return nil, fmt.Errorf("simulate: write %s: %w", cfg, err)
		}
		paths = append(paths, db, cfg)
	}
	return paths, nil
}

// writeFederation writes the sandbox federation of --federation: a CA and
// certificates under dir/certs, coordinator.yaml, and a federation section
// appended to every siteK.yaml. The coordinator's gRPC and metrics ports
// are free loopback ports at the time of writing.
func writeFederation(dir string, sites int) ([]string, error) {
	certDir := filepath.Join(dir, "certs")
	caDir := filepath.Join(certDir, "ca")
	if _, err := certs.InitCA(caDir); err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	names := make([]string, sites)
	for k := range names {
		names[k] = fmt.Sprintf("site%d", k+1)
	}
	for _, n := range append([]string{"coordinator"}, names...) {
		req := certs.Request{Name: n, Role: certs.RoleSite}
		if n == "coordinator" {
			req.Role, req.Hosts = certs.RoleCoordinator, defaultCoordinatorHosts
		}
		if _, err := certs.Issue(caDir, filepath.Join(certDir, n), req); err != nil {
			return nil, fmt.Errorf("simulate: %w", err)
		}
	}
	secret, err := newSecret()
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	tlsSection := func(name string) string {
		return fmt.Sprintf("  tls:\n    ca: certs/%[1]s/ca.crt\n    cert: certs/%[1]s/%[1]s.crt\n    key: certs/%[1]s/%[1]s.key\n", name)
	}
	var list strings.Builder
	for _, n := range names {
		fmt.Fprintf(&list, "    - %s\n", n)
	}
	coord := fmt.Sprintf(`# The coordinator of the sandbox federation, written by crffd simulate.
#   crffd coordinator --config coordinator.yaml --once
federation:
  coordinator: coordinator
  address: %s
  transport: grpc
%s  round_timeout: 2m
  retries: 3
  metrics_address: 127.0.0.1:%d
coordinator:
  sites:
%s  state_db: coordinator.sqlite
  checkpoint_every: 1
kernel:
  name: gaussian
model:
  features: 50
  latent: 5
  rounds: 100
`, addr, tlsSection("coordinator"), ports[1], list.String())
	path := filepath.Join(dir, "coordinator.yaml")
	if err := os.WriteFile(path, []byte(coord), 0o644); err != nil {
		return nil, fmt.Errorf("simulate: write %s: %w", path, err)
	}
	out := []string{path}
	for _, n := range names {
		p := filepath.Join(dir, n+".yaml")
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("simulate: %w", err)
		}
		_, err = fmt.Fprintf(f, `# Take part in the sandbox federation with:
#   crffd site --config %s.yaml --once
federation:
  coordinator: coordinator
  address: %s
  transport: grpc
  # Shared by the sandbox's sites and never by the coordinator: it keys the
  # column fingerprints. A real site would rather set CRFFD_FEDERATION_SECRET.
  secret: %s
%s`, n, addr, secret, tlsSection(n))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("simulate: write %s: %w", p, err)
		}
	}
	return append(out, certDir), nil
}

// freePorts returns n distinct loopback ports free at the time of the call.
//
// The ports are closed before they are written into the sandbox's
// configurations, since the daemons that listen on them start later, in
// other processes; another process may take one in between, and the
// coordinator then fails to start with "address already in use" (edit the
// port in coordinator.yaml and the sites' files). The daemons accept port 0
// and log the address they bound ("coordinator listening", "serving health
// and metrics"), but the sites need the coordinator's address before it
// starts, so the sandbox cannot leave the choice to the kernel.
func freePorts(n int) ([]int, error) {
	var ports []int
	var lis []net.Listener
	defer func() {
		for _, l := range lis {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("simulate: find a free port: %w", err)
		}
		lis = append(lis, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// newSecret returns 256 random bits in hex, a federation.secret.
func newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("simulate: federation secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}
