package kit

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/crffd/crffd/certs"
	"github.com/crffd/crffd/ident"
)

// Limits of what Verify reads from an archive, which may come from
// anyone: a kit is a few kilobytes.
const (
	maxFiles    = 16
	maxFileSize = 1 << 20
)

// Report is what Verify found in a kit.
type Report struct {
	Name     string     // the daemon's federation name
	Role     certs.Role // what its certificate authenticates
	NotAfter time.Time  // when its certificate expires
	// Revocations reports that the kit holds the CA's revocation list.
	Revocations bool
	// Placeholders are the configuration's keys still to be set (their
	// values begin with Placeholder), in the file's order.
	Placeholders []string
}

// DaysLeft is the whole days from now until the certificate expires.
func (r *Report) DaysLeft(now time.Time) int { return int(r.NotAfter.Sub(now).Hours() / 24) }

// Verify checks the kit in the archive file at now: its layout, its
// certificate (issued by its CA, not revoked, valid now, for its role,
// matching its key), and its configuration (its names and certificate
// files). The errors wrap ErrKit and say what is wrong.
func Verify(file string, now time.Time) (*Report, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("kit: %w", err)
	}
	defer f.Close()
	r, err := VerifyReader(f, now)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return r, nil
}

// VerifyReader is Verify of the archive read from r.
func VerifyReader(r io.Reader, now time.Time) (*Report, error) {
	name, files, err := unpack(r)
	if err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrKit, fmt.Sprintf(format, a...))
	}
	want := []string{"certs/" + certs.CACertFile, "certs/" + name + ".crt", "certs/" + name + ".key", name + ".yaml", "README.md"}
	for _, w := range want {
		if _, ok := files[w]; !ok {
			return nil, bad("%s/%s is missing", name, w)
		}
	}
	for p := range files {
		if !slices.Contains(want, p) && p != "certs/"+certs.CRLFile {
			return nil, bad("%s/%s is not part of a kit", name, p)
		}
	}
	if m := files["certs/"+name+".key"].mode; m&0o077 != 0 {
		return nil, bad("%s/certs/%s.key has mode %04o: a private key is for its owner alone (0600)", name, name, m)
	}

	// The certificates are checked from files, as a daemon reads them.
	dir, err := os.MkdirTemp("", "crffd-kit-verify-")
	if err != nil {
		return nil, fmt.Errorf("kit: %w", err)
	}
	defer os.RemoveAll(dir)
	for p, fl := range files {
		if strings.HasPrefix(p, "certs/") {
			if err := os.WriteFile(filepath.Join(dir, path.Base(p)), fl.data, 0o600); err != nil {
				return nil, fmt.Errorf("kit: %w", err)
			}
		}
	}
	cf := certs.FilesIn(dir, name)
	id, err := certs.Load(cf)
	if err != nil {
		return nil, fmt.Errorf("%w: %s's certificate: %w", ErrKit, name, err)
	}
	if id.Name != name {
		return nil, bad("the certificate is of %q, the kit of %q", id.Name, name)
	}
	if now.Before(id.Leaf.NotBefore) || now.After(id.Leaf.NotAfter) {
		return nil, bad("%s's certificate is valid from %s to %s, not now (%s)", name,
			id.Leaf.NotBefore.UTC().Format(time.RFC3339), id.Leaf.NotAfter.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if id.Role != certs.RoleSite && id.Role != certs.RoleCoordinator {
		return nil, bad("%s's certificate is for both roles; a kit's is a site's or a coordinator's", name)
	}
	_, crl := files["certs/"+certs.CRLFile]
	rep := &Report{Name: name, Role: id.Role, NotAfter: id.Leaf.NotAfter, Revocations: crl}
	if rep.Placeholders, err = checkConfig(name, id.Role, crl, files[name+".yaml"].data); err != nil {
		return nil, err
	}
	return rep, nil
}

// file is one file of an archive.
type file struct {
	data []byte
	mode int64
}

// unpack reads the kit archive from r: one folder, NAME/, of regular
// files, nothing outside it, no more than maxFiles of at most maxFileSize.
// It returns NAME and the files by path within the folder.
func unpack(r io.Reader) (string, map[string]file, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return "", nil, fmt.Errorf("%w: not a gzip archive: %w", ErrKit, err)
	}
	tr := tar.NewReader(gz)
	name := ""
	files := map[string]file{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", nil, fmt.Errorf("%w: not a tar archive: %w", ErrKit, err)
		}
		p := strings.TrimSuffix(h.Name, "/")
		top, rest, _ := strings.Cut(p, "/")
		switch {
		case path.IsAbs(h.Name) || p != path.Clean(p) || strings.Contains(p, ".."):
			return "", nil, fmt.Errorf("%w: entry %q is not a plain path inside the kit", ErrKit, h.Name)
		case name == "":
			if err := ident.CheckName(top); err != nil {
				return "", nil, fmt.Errorf("%w: the kit's folder %q: %w", ErrKit, top, err)
			}
			name = top
		case top != name:
			return "", nil, fmt.Errorf("%w: entry %q is outside the kit's folder %s/", ErrKit, h.Name, name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		default:
			return "", nil, fmt.Errorf("%w: entry %q is not a file or a folder", ErrKit, h.Name)
		}
		if rest == "" {
			return "", nil, fmt.Errorf("%w: entry %q is a file where the kit's folder should be", ErrKit, h.Name)
		}
		if _, dup := files[rest]; dup {
			return "", nil, fmt.Errorf("%w: %q appears twice", ErrKit, h.Name)
		}
		if len(files) == maxFiles || h.Size > maxFileSize {
			return "", nil, fmt.Errorf("%w: more than %d files or a file over %d bytes (%q)", ErrKit, maxFiles, maxFileSize, h.Name)
		}
		data, err := io.ReadAll(io.LimitReader(tr, maxFileSize+1))
		if err != nil {
			return "", nil, fmt.Errorf("%w: reading %q: %w", ErrKit, h.Name, err)
		}
		files[rest] = file{data: data, mode: h.Mode}
	}
	if name == "" {
		return "", nil, fmt.Errorf("%w: the archive is empty", ErrKit)
	}
	return name, files, nil
}

// checkConfig checks the configuration of the daemon name of role, in a
// kit with or without the revocation list, and returns the keys still to
// set.
func checkConfig(name string, role certs.Role, crl bool, data []byte) ([]string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: %s.yaml: %w", ErrKit, name, err)
	}
	values := map[string]string{}
	var placeholders []string
	var walk func(prefix string, n *yaml.Node)
	walk = func(prefix string, n *yaml.Node) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(prefix, c)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				if prefix != "" {
					k = prefix + "." + k
				}
				walk(k, n.Content[i+1])
			}
		case yaml.ScalarNode:
			values[prefix] = n.Value
			if strings.HasPrefix(n.Value, Placeholder) {
				placeholders = append(placeholders, prefix)
			}
		case yaml.SequenceNode:
			values[prefix] = fmt.Sprint(len(n.Content))
		}
	}
	walk("", &doc)
	want := map[string]string{
		"federation.tls.ca":   "certs/" + certs.CACertFile,
		"federation.tls.cert": "certs/" + name + ".crt",
		"federation.tls.key":  "certs/" + name + ".key",
	}
	if crl {
		want["federation.tls.crl"] = "certs/" + certs.CRLFile
	}
	switch role {
	case certs.RoleSite:
		want["site.name"] = name
	case certs.RoleCoordinator:
		want["federation.coordinator"] = name
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if values[k] != want[k] {
			return nil, fmt.Errorf("%w: %s.yaml: %s is %q, want %q", ErrKit, name, k, values[k], want[k])
		}
	}
	if values["federation.address"] == "" {
		return nil, fmt.Errorf("%w: %s.yaml sets no federation.address", ErrKit, name)
	}
	if role == certs.RoleCoordinator && values["coordinator.sites"] == "" {
		return nil, fmt.Errorf("%w: %s.yaml lists no coordinator.sites", ErrKit, name)
	}
	if _, ok := values["federation.secret"]; ok && role == certs.RoleSite {
		return nil, fmt.Errorf("%w: %s.yaml holds the sites' secret, which a kit must not carry (it would reach whoever made the kit)", ErrKit, name)
	}
	return placeholders, nil
}
