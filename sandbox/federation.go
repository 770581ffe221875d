package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/crffd/crffd/certs"
)

// WriteFederation writes a federation of the sites site1..siteN that
// WriteSites wrote into dir: a CA and certificates under dir/certs,
// coordinator.yaml, and a federation section appended to every siteK.yaml,
// wired for the grpc transport over loopback. The coordinator's gRPC and
// metrics ports are free loopback ports at the time of writing. It returns
// the paths written.
func WriteFederation(dir string, sites int) ([]string, error) {
	names := make([]string, sites)
	for k := range names {
		names[k] = fmt.Sprintf("site%d", k+1)
	}
	certDir := filepath.Join(dir, "certs")
	if err := writeCerts(certDir, names); err != nil {
		return nil, err
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
	coord, err := coordinatorConfig(addr, fmt.Sprintf("127.0.0.1:%d", ports[1]), names)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "coordinator.yaml")
	if err := os.WriteFile(path, coord, 0o644); err != nil {
		return nil, fmt.Errorf("simulate: write %s: %w", path, err)
	}
	for _, n := range names {
		section, err := siteFederation(n, addr, secret)
		if err != nil {
			return nil, err
		}
		if err := appendFile(filepath.Join(dir, n+".yaml"), section); err != nil {
			return nil, err
		}
	}
	return []string{path, certDir}, nil
}

// writeCerts makes a CA under certDir/ca and a certificate folder under
// certDir for the coordinator and each of sites.
func writeCerts(certDir string, sites []string) error {
	caDir := filepath.Join(certDir, "ca")
	if _, err := certs.InitCA(caDir); err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	for _, n := range append([]string{"coordinator"}, sites...) {
		req := certs.Request{Name: n, Role: certs.RoleSite}
		if n == "coordinator" {
			req.Role, req.Hosts = certs.RoleCoordinator, certs.LocalHosts
		}
		if _, err := certs.Issue(caDir, filepath.Join(certDir, n), req); err != nil {
			return fmt.Errorf("simulate: %w", err)
		}
	}
	return nil
}

// appendFile appends text to the file at path, which must exist.
func appendFile(path string, text []byte) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	_, err = f.Write(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("simulate: write %s: %w", path, err)
	}
	return nil
}

// freePorts returns n distinct loopback ports free at the time of the call.
//
// The ports are closed before they are written into the sandbox's
// configurations, since the daemons that listen on them start later, in
// other processes; another process may take one in between, and the
// coordinator then fails to start with "address already in use" (edit the
// port in coordinator.yaml and the sites' files). The daemons accept port 0
// and log the address they bound ("coordinator listening", "serving health
// and metrics"), but the sites of these files need the coordinator's
// address before it starts, so files written for a user cannot leave the
// choice to the kernel. crffd demo, which starts the daemons itself, does:
// it starts the coordinator on port 0 and gives the sites the address it
// logs (package demo).
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
