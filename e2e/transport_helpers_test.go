package e2e

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/internal/testbin"
	"github.com/crffd/crffd/plugins/transport"
)

// syncBuf is a goroutine-safe log sink.
type syncBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls until s contains every want or the timeout passes.
func (b *syncBuf) waitFor(t *testing.T, d time.Duration, want ...string) {
	t.Helper()
	ok := waitFor(d, func() bool {
		s := b.String()
		for _, w := range want {
			if !strings.Contains(s, w) {
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("log lacks one of %q:\n%s", want, b.String())
	}
}

// openTransport launches the real transport plugin name, configured with
// cfg, logging to a buffer; it is closed at the end of the test.
func openTransport(t *testing.T, name string, cfg transport.Config) (*transport.Client, *syncBuf, error) {
	t.Helper()
	logs := &syncBuf{}
	if cfg.Options == nil {
		cfg.Options = map[string]string{}
	}
	cfg.Options[transport.OptionLogLevel] = "debug"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := transport.Open(ctx, transport.Options{
		Dir:    testbin.Build(t),
		Name:   name,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Config: cfg,
	})
	if err != nil {
		return nil, logs, err
	}
	t.Cleanup(func() { c.Close() })
	return c, logs, nil
}

// mustOpenTransport is openTransport that fails the test on error.
func mustOpenTransport(t *testing.T, name string, cfg transport.Config) (*transport.Client, *syncBuf) {
	t.Helper()
	c, logs, err := openTransport(t, name, cfg)
	if err != nil {
		t.Fatalf("open %s transport as %s: %v\nlog:\n%s", name, cfg.Name, err, logs)
	}
	return c, logs
}

// inbox opens c's Receive stream for the rest of the test.
func inbox(t *testing.T, c *transport.Client) <-chan *wire.Envelope {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return c.Receive(ctx).C()
}

// nextEnvelope returns the next envelope from ch, failing after a timeout.
func nextEnvelope(t *testing.T, ch <-chan *wire.Envelope) *wire.Envelope {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("receive stream ended")
		}
		return e
	case <-time.After(20 * time.Second):
		t.Fatal("no envelope arrived")
		return nil
	}
}

// sealed builds an envelope carrying a matrix of values.
func sealed(t *testing.T, kind wire.Kind, round uint64, from, to string, vals ...float64) *wire.Envelope {
	t.Helper()
	e, err := wire.New(wire.Header{RunID: "e2e-run", Model: "propensity", Round: round, Kind: kind, Sender: from, Recipient: to},
		[]wire.Tensor{{Name: "W/psi", Shape: []int{len(vals), 1}, Values: vals}, wire.Scalar("shared/a", 0.25)})
	if err != nil {
		t.Fatal(err)
	}
	return e
}
