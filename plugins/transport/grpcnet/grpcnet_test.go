package grpcnet_test

import (
	"context"
	"crypto/tls"
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
	"github.com/crffd/crffd/plugins/transport/grpcnet"
	"github.com/crffd/crffd/plugins/transport/grpcnet/netpb"
)

func TestExchange(t *testing.T) {
	p := newPKI(t)
	capDir := t.TempDir()
	coord, _, addr := start(t, config("coordinator", transport.RoleCoordinator, "127.0.0.1:0", p.dir,
		map[string]string{transport.OptionCapture: filepath.Join(capDir, "coord.bin")}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Weights for site-a wait in its queue until it connects.
	if err := coord.Send(ctx, env(t, wire.KindWeights, 1, "coordinator", "site-a", 1)); err != nil {
		t.Fatal(err)
	}
	siteA, _, _ := start(t, config("site-a", transport.RoleSite, addr, p.dir,
		map[string]string{transport.OptionCapture: filepath.Join(capDir, "a.bin")}))
	siteB, _, _ := start(t, config("site-b", transport.RoleSite, addr, p.dir, nil))
	if err := coord.Send(ctx, env(t, wire.KindWeights, 1, "coordinator", "site-b", 2)); err != nil {
		t.Fatal(err)
	}
	inA, inB, inC := collect(t, siteA), collect(t, siteB), collect(t, coord)
	if e := next(t, inA); e.Recipient != "site-a" || e.Tensors()[0].Values[0] != 1 {
		t.Errorf("site-a received %v", e)
	}
	if e := next(t, inB); e.Recipient != "site-b" || e.Tensors()[0].Values[0] != 2 {
		t.Errorf("site-b received %v", e)
	}
	for i, s := range []*grpcnet.Transport{siteA, siteB} {
		name := []string{"site-a", "site-b"}[i]
		if err := s.Send(ctx, env(t, wire.KindGradient, 1, name, "coordinator", float64(10+i))); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	got := map[string]float64{}
	for range 2 {
		e := next(t, inC)
		got[e.Sender] = e.Tensors()[0].Values[0]
	}
	if got["site-a"] != 10 || got["site-b"] != 11 {
		t.Errorf("coordinator received %v", got)
	}
	// A site sends only to its coordinator.
	err := siteA.Send(ctx, env(t, wire.KindGradient, 1, "site-a", "site-b", 0))
	if !errors.Is(err, transport.ErrRecipient) {
		t.Errorf("site to site: %v", err)
	}
	// The captures hold exactly the envelopes carried.
	for file, want := range map[string]string{"coord.bin": "> > < <", "a.bin": "< >"} {
		f, err := os.Open(filepath.Join(capDir, file))
		if err != nil {
			t.Fatal(err)
		}
		recs, err := transport.ReadCapture(f)
		f.Close()
		var dirs []string
		for _, r := range recs {
			dirs = append(dirs, string(r.Direction))
			if _, err := wire.Unmarshal(r.Envelope); err != nil {
				t.Errorf("%s: captured bytes are not an envelope: %v", file, err)
			}
		}
		if err != nil || strings.Join(dirs, " ") != want {
			t.Errorf("%s: directions %v (%v), want %s", file, dirs, err, want)
		}
	}
}

func TestReconnectGetsQueuedEnvelopes(t *testing.T) {
	p := newPKI(t)
	coord, coordLogs, addr := start(t, config("coordinator", transport.RoleCoordinator, "127.0.0.1:0", p.dir, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first, _, _ := start(t, config("site-a", transport.RoleSite, addr, p.dir, nil))
	in := collect(t, first)
	coord.Send(ctx, env(t, wire.KindWeights, 1, "coordinator", "site-a", 1))
	next(t, in)
	first.Close()
	waitLog(t, coordLogs, "site disconnected")
	// Sent while site-a is away; delivered when it comes back.
	coord.Send(ctx, env(t, wire.KindWeights, 2, "coordinator", "site-a", 2))
	second, _, _ := start(t, config("site-a", transport.RoleSite, addr, p.dir, nil))
	in = collect(t, second)
	// Round 1 comes again if its acknowledgement was lost with the first
	// connection: delivery is at least once.
	e := next(t, in)
	if e.Round == 1 {
		e = next(t, in)
	}
	if e.Round != 2 {
		t.Errorf("after reconnecting site-a received round %d, want 2", e.Round)
	}
	if err := second.Send(ctx, env(t, wire.KindGradient, 2, "site-a", "coordinator", 3)); err != nil {
		t.Errorf("send after reconnecting: %v", err)
	}
}

func TestOtherCARefused(t *testing.T) {
	p := newPKI(t)
	_, coordLogs, addr := start(t, config("coordinator", transport.RoleCoordinator, "127.0.0.1:0", p.dir, nil))
	// An impostor whose CA bundle holds its own CA and the federation's, so
	// that it trusts the coordinator, presents a certificate of its own CA.
	dir := t.TempDir()
	for _, f := range []string{"site-a.crt", "site-a.key"} {
		b, _ := os.ReadFile(filepath.Join(p.evil, f))
		os.WriteFile(filepath.Join(dir, f), b, 0o600)
	}
	own, _ := os.ReadFile(filepath.Join(p.evil, certs.CACertFile))
	fed, _ := os.ReadFile(filepath.Join(p.dir, certs.CACertFile))
	os.WriteFile(filepath.Join(dir, certs.CACertFile), append(own, fed...), 0o600)
	impostor, _, _ := start(t, config("site-a", transport.RoleSite, addr, dir, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := impostor.Send(ctx, env(t, wire.KindGradient, 1, "site-a", "coordinator", 1))
	if !errors.Is(err, transport.ErrUnavailable) || !strings.Contains(err.Error(), "last error") {
		t.Errorf("impostor Send: %v, want ErrUnavailable", err)
	}
	waitLog(t, coordLogs, "TLS handshake failed", "certificate signed by unknown authority")
}

func TestSenderMustMatchCertificate(t *testing.T) {
	p := newPKI(t)
	_, coordLogs, addr := start(t, config("coordinator", transport.RoleCoordinator, "127.0.0.1:0", p.dir, nil))
	// A transport refuses to start under a name its certificate does not carry.
	bad := config("site-b", transport.RoleSite, addr, p.dir, nil)
	bad.TLS = certs.FilesIn(p.dir, "site-a")
	if _, err := grpcnet.New(nil).Configure(context.Background(), bad); !errors.Is(err, transport.ErrConfig) ||
		!strings.Contains(err.Error(), `names "site-a", but this daemon is configured as "site-b"`) {
		t.Errorf("Configure under another name: %v", err)
	}
	// A client that is not our transport, with site-a's certificate,
	// sends an envelope that claims to come from site-b.
	tlsConf, err := certs.ClientConfig(certs.FilesIn(p.dir, "site-a"), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	reason := forge(t, addr, tlsConf, env(t, wire.KindGradient, 1, "site-b", "coordinator", 1))
	want := `certificate name "site-a" does not match envelope sender "site-b"`
	if reason != want {
		t.Errorf("coordinator answered %q, want %q", reason, want)
	}
	waitLog(t, coordLogs, "refused an envelope", "does not match envelope sender")
}

// forge sends e over a raw Relay stream and returns the coordinator's answer.
func forge(t *testing.T, addr string, tlsConf *tls.Config, e *wire.Envelope) string {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tlsConf)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
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

// A site accepts only the coordinator it is configured with: another
// coordinator certificate of the same CA, valid for the address dialled,
// is not used.
func TestSiteChecksCoordinatorName(t *testing.T) {
	p := newPKI(t)
	if _, err := certs.Issue(p.dir, p.dir, request("other-coord")); err != nil {
		t.Fatal(err)
	}
	_, _, addr := start(t, config("other-coord", transport.RoleCoordinator, "127.0.0.1:0", p.dir, nil))
	site, _, _ := start(t, config("site-a", transport.RoleSite, addr, p.dir, nil))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := site.Send(ctx, env(t, wire.KindGradient, 1, "site-a", "coordinator", 1))
	if !errors.Is(err, transport.ErrUnavailable) || !strings.Contains(err.Error(), `server certificate names "other-coord", not the coordinator "coordinator"`) {
		t.Errorf("Send: %v", err)
	}
}

func TestConfigureErrors(t *testing.T) {
	p := newPKI(t)
	for _, tc := range []struct {
		name string
		cfg  transport.Config
		msg  string
	}{
		{"unknown option", config("site-a", transport.RoleSite, "127.0.0.1:1", p.dir, map[string]string{"spool": "x"}), "unknown option"},
		{"bad queue", config("site-a", transport.RoleSite, "127.0.0.1:1", p.dir, map[string]string{grpcnet.OptionQueue: "0"}), "queue"},
		{"bad duration", config("site-a", transport.RoleSite, "127.0.0.1:1", p.dir, map[string]string{grpcnet.OptionReconnectMax: "soon"}), "reconnect_max"},
		{"no address", config("site-a", transport.RoleSite, "", p.dir, nil), "no coordinator address"},
		{"bad address", config("site-a", transport.RoleSite, "nowhere", p.dir, nil), "nowhere"},
		{"no certificate", config("site-c", transport.RoleSite, "127.0.0.1:1", p.dir, nil), "site-c.crt"},
		{"busy port", config("coordinator", transport.RoleCoordinator, "256.0.0.1:0", p.dir, nil), "listen"},
		{"no coordinator name", func() transport.Config {
			c := config("site-a", transport.RoleSite, "127.0.0.1:1", p.dir, nil)
			c.CoordinatorName = ""
			return c
		}(), "no coordinator name"},
		{"site certificate serving", config("site-a", transport.RoleCoordinator, "127.0.0.1:0", p.dir, nil), "is a site certificate"},
		{"coordinator certificate dialling", config("coordinator", transport.RoleSite, "127.0.0.1:1", p.dir, nil), "is a coordinator certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := grpcnet.New(nil).Configure(context.Background(), tc.cfg)
			if !errors.Is(err, transport.ErrConfig) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Configure: %v, want ErrConfig containing %q", err, tc.msg)
			}
		})
	}
	tr := grpcnet.New(nil)
	if err := tr.Send(context.Background(), env(t, wire.KindGradient, 1, "site-a", "coordinator", 1)); !errors.Is(err, transport.ErrNotConfigured) {
		t.Errorf("Send before Configure: %v", err)
	}
}
