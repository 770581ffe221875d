package grpcnet_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crffd/crffd/certs"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/plugins/transport"
	"github.com/crffd/crffd/plugins/transport/grpcnet"
)

// logBuf is a goroutine-safe log sink.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// pki is a federation CA with certificates for a coordinator and two
// sites, and a second CA with a certificate for site-a.
type pki struct{ dir, evil string }

func newPKI(t *testing.T) pki {
	t.Helper()
	root := t.TempDir()
	p := pki{dir: filepath.Join(root, "fed"), evil: filepath.Join(root, "evil")}
	for _, d := range []string{p.dir, p.evil} {
		if _, err := certs.InitCA(d); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"coordinator", "site-a", "site-b"} {
		if _, err := certs.Issue(p.dir, p.dir, request(n)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := certs.Issue(p.evil, p.evil, request("site-a")); err != nil {
		t.Fatal(err)
	}
	return p
}

// request is the certificate request of a test daemon: a coordinator's
// (its name has "coord" in it), valid for loopback, or a site's.
func request(name string) certs.Request {
	if strings.Contains(name, "coord") {
		return certs.Request{Name: name, Role: certs.RoleCoordinator, Hosts: []string{"127.0.0.1", "localhost"}}
	}
	return certs.Request{Name: name, Role: certs.RoleSite}
}

// start configures a grpc transport and closes it at the end of the test.
func start(t *testing.T, cfg transport.Config) (*grpcnet.Transport, *logBuf, string) {
	t.Helper()
	logs := &logBuf{}
	tr := grpcnet.New(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	addr, err := tr.Configure(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr, logs, addr
}

func config(name string, role transport.Role, addr, dir string, opts map[string]string) transport.Config {
	if opts == nil {
		opts = map[string]string{}
	}
	return transport.Config{Name: name, Role: role, Coordinator: addr, CoordinatorName: "coordinator", TLS: certs.FilesIn(dir, name), Options: opts}
}

func env(t *testing.T, kind wire.Kind, round uint64, from, to string, v float64) *wire.Envelope {
	t.Helper()
	e, err := wire.New(wire.Header{RunID: "run-1", Model: "outcome", Round: round, Kind: kind, Sender: from, Recipient: to},
		[]wire.Tensor{wire.Vector("G/beta0", []float64{v, v + 1})})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// collect receives envelopes from tr into a channel until the test ends.
func collect(t *testing.T, tr *grpcnet.Transport) <-chan *wire.Envelope {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch := make(chan *wire.Envelope, 64)
	go tr.Receive(ctx, func(e *wire.Envelope) error { ch <- e; return nil })
	return ch
}

// next returns the next envelope from ch or fails after a timeout.
func next(t *testing.T, ch <-chan *wire.Envelope) *wire.Envelope {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no envelope arrived")
		return nil
	}
}

// waitLog waits until logs contains every want.
func waitLog(t *testing.T, logs *logBuf, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		missing := ""
		for _, w := range want {
			if !bytes.Contains([]byte(logs.String()), []byte(w)) {
				missing = w
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("log lacks %q:\n%s", missing, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
