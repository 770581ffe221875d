package kit

import (
	"archive/tar"
	"cmp"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crffd/crffd/certs"
	"github.com/crffd/crffd/ident"
	"github.com/crffd/crffd/internal/yamlout"
)

// Placeholder begins every value of a kit's configuration that the
// daemon's host must set before the daemon starts.
const Placeholder = "SET-ME"

// ErrKit reports an archive that is not a usable kit.
var ErrKit = errors.New("kit: not a usable start-up kit")

// Site describes the kit of one site.
type Site struct {
	Name string // the site's federation name
	// Coordinator is the coordinator's host:port, where the site dials.
	Coordinator string
	// CoordinatorName is the coordinator's federation name;
	// "coordinator" when empty.
	CoordinatorName string
	// Validity is how long the site's certificate is valid; 0 means
	// certs.CertValidity.
	Validity time.Duration
}

// Coordinator describes the kit of a federation's coordinator.
type Coordinator struct {
	Name    string   // its federation name; "coordinator" when empty
	Address string   // host:port it listens on
	Sites   []string // the sites' federation names
	// Hosts are the names and addresses sites dial it by, which its
	// certificate carries; the host of Address when empty.
	Hosts    []string
	Validity time.Duration // as Site's
}

// WriteSite issues a certificate for s.Name with the CA in caDir and
// writes the site's kit to the archive out, which must not exist.
func WriteSite(caDir, out string, s Site) error {
	if err := ident.CheckName(s.Name); err != nil {
		return fmt.Errorf("kit: site %w", err)
	}
	coord := cmp.Or(s.CoordinatorName, "coordinator")
	if _, _, err := net.SplitHostPort(s.Coordinator); err != nil || strings.HasPrefix(s.Coordinator, ":") {
		return fmt.Errorf("kit: coordinator address %q: want HOST:PORT, where the site dials", s.Coordinator)
	}
	return write(caDir, out, s.Name, certs.Request{Name: s.Name, Role: certs.RoleSite, Validity: s.Validity},
		func(crl bool) ([]byte, error) { return siteConfig(s, coord, crl) },
		func() string { return siteReadme(s, coord) })
}

// WriteCoordinator issues a certificate for the coordinator with the CA
// in caDir and writes its kit to the archive out, which must not exist.
func WriteCoordinator(caDir, out string, c Coordinator) error {
	c.Name = cmp.Or(c.Name, "coordinator")
	if err := ident.CheckName(c.Name); err != nil {
		return fmt.Errorf("kit: coordinator %w", err)
	}
	host, _, err := net.SplitHostPort(c.Address)
	if err != nil {
		return fmt.Errorf("kit: coordinator address %q: want HOST:PORT, where it listens: %w", c.Address, err)
	}
	if len(c.Hosts) == 0 {
		if host == "" {
			return fmt.Errorf("kit: coordinator address %q names no host the sites could dial; give its hosts", c.Address)
		}
		c.Hosts = []string{host}
	}
	if len(c.Sites) == 0 {
		return errors.New("kit: a coordinator's kit needs its sites")
	}
	for _, s := range c.Sites {
		if err := ident.CheckName(s); err != nil {
			return fmt.Errorf("kit: site %w", err)
		}
	}
	return write(caDir, out, c.Name, certs.Request{Name: c.Name, Role: certs.RoleCoordinator, Hosts: c.Hosts, Validity: c.Validity},
		func(crl bool) ([]byte, error) { return coordinatorConfig(c, crl) },
		func() string { return coordinatorReadme(c) })
}

// write issues req's certificate into a staging folder, adds the CA's
// revocation list when there is one, the configuration and the README,
// and archives the folder as name/ into out.
func write(caDir, out, name string, req certs.Request, config func(crl bool) ([]byte, error), readme func() string) error {
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("kit: %s exists; refusing to overwrite it", out)
	}
	stage, err := os.MkdirTemp("", "crffd-kit-")
	if err != nil {
		return fmt.Errorf("kit: %w", err)
	}
	defer os.RemoveAll(stage)
	certDir := filepath.Join(stage, "certs")
	if _, err := certs.Issue(caDir, certDir, req); err != nil {
		return fmt.Errorf("kit: %w", err)
	}
	// Unpacked by root, the folders are the daemon's group's to read; the
	// key stays its owner's alone.
	if err := os.Chmod(stage, 0o755); err != nil {
		return fmt.Errorf("kit: %w", err)
	}
	if err := os.Chmod(certDir, 0o750); err != nil {
		return fmt.Errorf("kit: %w", err)
	}
	crl := false
	if b, err := os.ReadFile(filepath.Join(caDir, certs.CRLFile)); err == nil {
		if err := os.WriteFile(filepath.Join(certDir, certs.CRLFile), b, 0o644); err != nil {
			return fmt.Errorf("kit: %w", err)
		}
		crl = true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("kit: %w", err)
	}
	cfg, err := config(crl)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(stage, name+".yaml"), cfg, 0o644); err != nil {
		return fmt.Errorf("kit: %w", err)
	}
	if err := os.WriteFile(filepath.Join(stage, "README.md"), []byte(readme()), 0o644); err != nil {
		return fmt.Errorf("kit: %w", err)
	}
	return archive(stage, name, out)
}

// archive writes the files under dir into a new gzip-compressed tar at
// out, under the folder name/, keeping their modes.
func archive(dir, name, out string) (err error) {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("kit: %w", err)
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("kit: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(out)
		}
	}()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(filepath.Join(name, rel))
		if d.IsDir() {
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = gz.Close()
	}
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return fmt.Errorf("kit: write %s: %w", out, err)
	}
	return nil
}

// tlsSection is the federation.tls section of the daemon name.
func tlsSection(name string, crl bool) yamlout.Field {
	fields := []yamlout.Field{
		{Key: "ca", Value: "certs/" + certs.CACertFile},
		{Key: "cert", Value: "certs/" + name + ".crt"},
		{Key: "key", Value: "certs/" + name + ".key"},
	}
	if crl {
		fields = append(fields, yamlout.Field{Key: "crl", Value: "certs/" + certs.CRLFile})
	}
	return yamlout.Field{Key: "tls", Value: fields}
}

// siteConfig is the configuration of the site s, whose coordinator is
// named coord.
func siteConfig(s Site, coord string, crl bool) ([]byte, error) {
	set := func(what string) string { return Placeholder + ": " + what }
	return yamlout.Marshal(fmt.Sprintf("# Site %s of a crffd federation, from its start-up kit. Set every value that\n"+
		"# begins with %s (crffd kit verify lists them), then:\n#   crffd site --config %s.yaml", s.Name, Placeholder, s.Name),
		yamlout.Field{Key: "site", Value: []yamlout.Field{
			{Key: "name", Value: s.Name},
			{Key: "db", Value: set("the site's SQLite file, e.g. /var/lib/crffd/" + s.Name + ".sqlite")},
			{Key: "table", Value: set("the table or view of the records")},
			{Key: "id_column", Value: set("its row id column (INTEGER or TEXT, unique)")},
			{Key: "treatment_column", Value: set("its treatment column (0 or 1)")},
			{Key: "outcome_column", Value: set("its outcome column")},
		}},
		yamlout.Field{Key: "federation", Value: []yamlout.Field{
			{Key: "coordinator", Value: coord},
			{Key: "address", Value: s.Coordinator},
			{Key: "transport", Value: "grpc"},
			tlsSection(s.Name, crl),
		}, Comment: "# The sites' shared secret (federation.secret) is agreed among the sites and\n" +
			"# never with the coordinator: set CRFFD_FEDERATION_SECRET in the daemon's environment."},
	)
}

// coordinatorConfig is the configuration of the coordinator c.
func coordinatorConfig(c Coordinator, crl bool) ([]byte, error) {
	return yamlout.Marshal(fmt.Sprintf("# The coordinator %s of a crffd federation, from its start-up kit:\n#   crffd coordinator --config %s.yaml", c.Name, c.Name),
		yamlout.Field{Key: "federation", Value: []yamlout.Field{
			{Key: "coordinator", Value: c.Name},
			{Key: "address", Value: c.Address},
			{Key: "transport", Value: "grpc"},
			tlsSection(c.Name, crl),
		}},
		yamlout.Field{Key: "coordinator", Value: []yamlout.Field{
			{Key: "sites", Value: c.Sites},
			{Key: "state_db", Value: c.Name + ".sqlite"},
		}},
	)
}
