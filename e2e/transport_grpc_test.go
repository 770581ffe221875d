package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/crffd/crffd/certs"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/plugins/transport"
	"github.com/crffd/crffd/plugins/transport/grpcnet/netpb"
)

// federationPKI makes a federation CA with certificates for a coordinator
// on loopback and for site-a and site-b, and returns its folder.
func federationPKI(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fed")
	if _, err := certs.InitCA(dir); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"coordinator", "site-a", "site-b"} {
		req := certs.Request{Name: n, Role: certs.RoleSite}
		if n == "coordinator" {
			req.Role, req.Hosts = certs.RoleCoordinator, []string{"127.0.0.1", "localhost"}
		}
		if _, err := certs.Issue(dir, dir, req); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func grpcConfig(name string, role transport.Role, addr string, files certs.Files, opts map[string]string) transport.Config {
	if opts == nil {
		opts = map[string]string{}
	}
	return transport.Config{Name: name, Role: role, Coordinator: addr, CoordinatorName: "coordinator", TLS: files, Options: opts}
}

// TestTransportGRPC runs a coordinator and two sites as grpc transport
// plugin processes over loopback with mutual TLS, exchanges envelopes both
// ways, and checks that impostors are refused.
func TestTransportGRPC(t *testing.T) {
	pki := federationPKI(t)
	capture := filepath.Join(t.TempDir(), "coordinator.capture")
	coord, coordLogs := mustOpenTransport(t, "grpc", grpcConfig("coordinator", transport.RoleCoordinator, "127.0.0.1:0",
		certs.FilesIn(pki, "coordinator"), map[string]string{transport.OptionCapture: capture}))
	addr := coord.Address()
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Fatalf("coordinator address %q", addr)
	}
	coordIn := inbox(t, coord)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("exchange", func(t *testing.T) {
		sites := []string{"site-a", "site-b"}
		ins := map[string]<-chan *wire.Envelope{}
		clients := map[string]*transport.Client{}
		for _, s := range sites {
			c, _ := mustOpenTransport(t, "grpc", grpcConfig(s, transport.RoleSite, addr, certs.FilesIn(pki, s), nil))
			clients[s], ins[s] = c, inbox(t, c)
		}
		for round := uint64(1); round <= 3; round++ {
			sent := map[string]*wire.Envelope{}
			for i, s := range sites {
				e := sealed(t, wire.KindWeights, round, "coordinator", s, float64(round), float64(i), -1.5)
				sent[s] = e
				if err := coord.Send(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range sites {
				got := nextEnvelope(t, ins[s])
				if got.Key() != sent[s].Key() {
					t.Errorf("%s received %v, want %v", s, got, sent[s])
				}
				if err := clients[s].Send(ctx, sealed(t, wire.KindGradient, round, s, "coordinator", float64(10*round), 2)); err != nil {
					t.Fatalf("%s: %v", s, err)
				}
			}
			from := map[string]bool{}
			for range sites {
				e := nextEnvelope(t, coordIn)
				if e.Round != round || e.Kind != wire.KindGradient || e.Tensors()[0].Values[0] != float64(10*round) {
					t.Errorf("coordinator received %v", e)
				}
				from[e.Sender] = true
			}
			if len(from) != 2 {
				t.Errorf("round %d: gradients from %v", round, from)
			}
		}
		f, err := os.Open(capture)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		recs, err := transport.ReadCapture(f)
		if err != nil || len(recs) < 12 {
			t.Fatalf("capture: %d records, %v; want at least 12", len(recs), err)
		}
		for _, r := range recs {
			if _, err := wire.Unmarshal(r.Envelope); err != nil {
				t.Errorf("captured bytes are not an envelope: %v", err)
			}
		}
	})

	t.Run("certificate of another CA", func(t *testing.T) {
		// The impostor's bundle holds its own CA and the federation's: it
		// trusts the coordinator, but its certificate is not the federation's.
		evil := filepath.Join(t.TempDir(), "evil")
		if _, err := certs.InitCA(evil); err != nil {
			t.Fatal(err)
		}
		if _, err := certs.Issue(evil, evil, certs.Request{Name: "site-a", Role: certs.RoleSite}); err != nil {
			t.Fatal(err)
		}
		own, _ := os.ReadFile(filepath.Join(evil, certs.CACertFile))
		fed, _ := os.ReadFile(filepath.Join(pki, certs.CACertFile))
		bundle := filepath.Join(evil, "bundle.crt")
		os.WriteFile(bundle, append(own, fed...), 0o600)
		files := certs.FilesIn(evil, "site-a")
		files.CA = bundle
		impostor, _ := mustOpenTransport(t, "grpc", grpcConfig("site-a", transport.RoleSite, addr, files, nil))
		sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
		defer scancel()
		err := impostor.Send(sctx, sealed(t, wire.KindGradient, 9, "site-a", "coordinator", 1))
		if !errors.Is(err, transport.ErrUnavailable) {
			t.Errorf("impostor Send: %v, want ErrUnavailable", err)
		}
		t.Logf("the impostor sees: %v", err)
		coordLogs.waitFor(t, 10*time.Second, "TLS handshake failed", "certificate signed by unknown authority")
	})

	t.Run("certificate name differs from sender", func(t *testing.T) {
		// Our transport refuses to run under a name its certificate lacks.
		_, _, err := openTransport(t, "grpc", grpcConfig("site-b", transport.RoleSite, addr, certs.FilesIn(pki, "site-a"), nil))
		if !errors.Is(err, transport.ErrConfig) || !strings.Contains(err.Error(), `names "site-a", but this daemon is configured as "site-b"`) {
			t.Errorf("open as site-b with site-a's certificate: %v", err)
		}
		// Another program with site-a's certificate claims to be site-b.
		reason := forgeSender(t, addr, certs.FilesIn(pki, "site-a"), sealed(t, wire.KindGradient, 9, "site-b", "coordinator", 1))
		want := `certificate name "site-a" does not match envelope sender "site-b"`
		if reason != want {
			t.Errorf("coordinator answered %q, want %q", reason, want)
		}
		coordLogs.waitFor(t, 10*time.Second, "refused an envelope", "does not match envelope sender")
		for _, line := range strings.Split(coordLogs.String(), "\n") {
			if strings.Contains(line, "refused") {
				t.Logf("coordinator log: %s", line)
			}
		}
		select {
		case e := <-coordIn:
			t.Errorf("the coordinator delivered a refused envelope: %v", e)
		case <-time.After(300 * time.Millisecond):
		}
	})
}

// forgeSender sends e to the coordinator over a raw Relay stream
// authenticated with files, and returns the coordinator's answer.
func forgeSender(t *testing.T, addr string, files certs.Files, e *wire.Envelope) string {
	t.Helper()
	tlsConf, err := certs.ClientConfig(files, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tlsConf)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := netpb.NewRelayClient(conn).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&netpb.Frame{Seq: 1, Envelope: b}); err != nil {
		t.Fatal(err)
	}
	f, err := stream.Recv()
	if err != nil || f.GetAck() != 1 {
		t.Fatalf("answer %v, %v", f, err)
	}
	return f.GetRefused()
}
