package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/plugins/transport"
)

// hub connects memory transports in one process.
type hub struct {
	mu    sync.Mutex
	boxes map[string]chan *wire.Envelope
}

func newHub() *hub { return &hub{boxes: map[string]chan *wire.Envelope{}} }

func (h *hub) box(name string) chan *wire.Envelope {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, ok := h.boxes[name]
	if !ok {
		b = make(chan *wire.Envelope, 16)
		h.boxes[name] = b
	}
	return b
}

// memory is a Transport over a hub. sendErr, when set, is returned by Send;
// extra envelopes are delivered before the inbox's.
type memory struct {
	hub     *hub
	name    string
	sendErr error
	extra   []*wire.Envelope
	panics  bool
	pending *wire.Envelope
}

func (m *memory) Configure(_ context.Context, cfg transport.Config) (string, error) {
	if cfg.Options["fail"] != "" {
		return "", fmt.Errorf("option fail=%s: %w", cfg.Options["fail"], transport.ErrConfig)
	}
	m.name = cfg.Name
	return "mem://" + cfg.Name, nil
}

func (m *memory) Send(ctx context.Context, e *wire.Envelope) error {
	if m.panics {
		panic("bug in transport")
	}
	if m.sendErr != nil {
		return m.sendErr
	}
	select {
	case m.hub.box(e.Recipient) <- e:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *memory) Receive(ctx context.Context, deliver func(*wire.Envelope) error) error {
	for len(m.extra) > 0 {
		if err := deliver(m.extra[0]); err != nil {
			return err
		}
		m.extra = m.extra[1:]
	}
	for {
		if m.pending == nil {
			select {
			case m.pending = <-m.hub.box(m.name):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := deliver(m.pending); err != nil {
			return err
		}
		m.pending = nil
	}
}

func cfg(name string, role transport.Role) transport.Config {
	return transport.Config{Name: name, Role: role, Options: map[string]string{}}
}

func env(t *testing.T, kind wire.Kind, round uint64, from, to string, vals ...float64) *wire.Envelope {
	t.Helper()
	e, err := wire.New(wire.Header{RunID: "run-1", Round: round, Kind: kind, Sender: from, Recipient: to},
		[]wire.Tensor{wire.Vector("g", vals)})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func open(t *testing.T, impl transport.Transport, c transport.Config, log *slog.Logger) *transport.Client {
	t.Helper()
	cl, err := transport.NewTestClient(t, impl, c, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func TestSendReceive(t *testing.T) {
	h := newHub()
	coord := open(t, &memory{hub: h}, cfg("coordinator", transport.RoleCoordinator), nil)
	site := open(t, &memory{hub: h}, cfg("site-a", transport.RoleSite), nil)
	if coord.Address() != "mem://coordinator" {
		t.Errorf("Address = %q", coord.Address())
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := site.Receive(ctx)
	for r := uint64(1); r <= 3; r++ {
		if err := coord.Send(ctx, env(t, wire.KindWeights, r, "coordinator", "site-a", float64(r), 2)); err != nil {
			t.Fatal(err)
		}
	}
	for r := uint64(1); r <= 3; r++ {
		select {
		case e := <-in.C():
			if e.Round != r || e.Kind != wire.KindWeights || e.Tensors()[0].Values[0] != float64(r) {
				t.Errorf("received %v, want round %d", e, r)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("nothing received")
		}
	}
	cancel()
	for range in.C() {
	}
	if !errors.Is(in.Err(), context.Canceled) {
		t.Errorf("Err after cancel = %v", in.Err())
	}
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	h := newHub()
	for _, tc := range []struct {
		name string
		impl *memory
		cfg  transport.Config
		send *wire.Envelope
		want error
		msg  string
	}{
		{"refused", &memory{hub: h, sendErr: fmt.Errorf("certificate says x: %w", transport.ErrRefused)}, cfg("site-a", transport.RoleSite),
			env(t, wire.KindGradient, 1, "site-a", "coordinator", 1), transport.ErrRefused, "certificate says x"},
		{"queue full", &memory{hub: h, sendErr: transport.ErrQueueFull}, cfg("coordinator", transport.RoleCoordinator),
			env(t, wire.KindWeights, 1, "coordinator", "site-a", 1), transport.ErrQueueFull, "queue"},
		{"unavailable", &memory{hub: h, sendErr: fmt.Errorf("dial: %w", transport.ErrUnavailable)}, cfg("site-a", transport.RoleSite),
			env(t, wire.KindGradient, 1, "site-a", "coordinator", 1), transport.ErrUnavailable, "dial"},
		{"recipient", &memory{hub: h, sendErr: transport.ErrRecipient}, cfg("site-a", transport.RoleSite),
			env(t, wire.KindGradient, 1, "site-a", "site-b", 1), transport.ErrRecipient, "recipient"},
		{"wrong sender", &memory{hub: h}, cfg("site-a", transport.RoleSite),
			env(t, wire.KindGradient, 1, "site-b", "coordinator", 1), transport.ErrSender, `sender "site-b"`},
		{"panic", &memory{hub: h, panics: true}, cfg("site-a", transport.RoleSite),
			env(t, wire.KindGradient, 1, "site-a", "coordinator", 1), nil, "send panicked: bug in transport"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := open(t, tc.impl, tc.cfg, nil)
			err := c.Send(ctx, tc.send)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Send: %v, want %v containing %q", err, tc.want, tc.msg)
			}
		})
	}
	// An envelope changed after it was sealed is refused before it leaves.
	c := open(t, &memory{hub: h}, cfg("site-a", transport.RoleSite), nil)
	e := env(t, wire.KindGradient, 1, "site-a", "coordinator", 1)
	e.Tensors()[0].Values[0] = 2
	if err := c.Send(ctx, e); !errors.Is(err, transport.ErrEnvelope) || !errors.Is(err, wire.ErrDigest) {
		t.Errorf("Send of a tampered envelope: %v", err)
	}
}

func TestConfigure(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  transport.Config
		msg  string
	}{
		{"bad name", transport.Config{Name: "Site A", Role: transport.RoleSite}, "name"},
		{"no role", transport.Config{Name: "site-a"}, "want site or coordinator"},
		{"impl refuses", transport.Config{Name: "site-a", Role: transport.RoleSite, Options: map[string]string{"fail": "yes"}}, "option fail=yes"},
		{"log level", transport.Config{Name: "site-a", Role: transport.RoleSite, Options: map[string]string{transport.OptionLogLevel: "loud"}}, "log_level"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := transport.NewTestClient(t, &memory{hub: newHub()}, tc.cfg, nil, nil)
			if !errors.Is(err, transport.ErrConfig) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("configure: %v, want ErrConfig containing %q", err, tc.msg)
			}
		})
	}
	for s, want := range map[string]transport.Role{"site": transport.RoleSite, "coordinator": transport.RoleCoordinator} {
		if r, err := transport.ParseRole(s); r != want || err != nil || r.String() != s {
			t.Errorf("ParseRole(%q) = %v, %v", s, r, err)
		}
	}
	if _, err := transport.ParseRole("hub"); !errors.Is(err, transport.ErrConfig) {
		t.Errorf("ParseRole(hub) = %v", err)
	}
}

// TestReceiveDropsMisaddressed checks that the plugin side drops an
// envelope its implementation delivers to the wrong daemon, and logs why
// without its values.
func TestReceiveDropsMisaddressed(t *testing.T) {
	var logs bytes.Buffer
	pl := transport.NewPluginLogger(&logs)
	h := newHub()
	impl := &memory{hub: h, extra: []*wire.Envelope{env(t, wire.KindWeights, 1, "coordinator", "site-b", 1234.5678)}}
	c, err := transport.NewTestClient(t, impl, cfg("site-a", transport.RoleSite), nil, pl)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in := c.Receive(ctx)
	h.box("site-a") <- env(t, wire.KindWeights, 2, "coordinator", "site-a", 1)
	e := <-in.C()
	if e == nil || e.Round != 2 {
		t.Fatalf("received %v, want round 2 (round 1 was for site-b)", e)
	}
	if !strings.Contains(logs.String(), `recipient \"site-b\" is not \"site-a\"`) || strings.Contains(logs.String(), "1234.5678") {
		t.Errorf("plugin log:\n%s", logs.String())
	}
}

func TestPluginLoggerFormat(t *testing.T) {
	var buf bytes.Buffer
	pl := transport.NewPluginLogger(&buf)
	pl.Logger().Debug("hidden")
	if err := pl.SetLevel("debug"); err != nil {
		t.Fatal(err)
	}
	pl.Logger().Warn("refused", transport.LogKeyPeer, "site-a")
	pl.Logger().Debug("shown")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("log lines:\n%s", buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	ts, _ := rec["@timestamp"].(string)
	if _, err := time.Parse("2006-01-02T15:04:05.000000Z07:00", ts); err != nil || rec["@level"] != "warn" || rec["@message"] != "refused" || rec["peer"] != "site-a" {
		t.Errorf("record %v (timestamp: %v)", rec, err)
	}
}

func TestCapture(t *testing.T) {
	path := filepath.Join(t.TempDir(), "capture.bin")
	c, err := transport.OpenCapture(path)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte{7}, 300)
	for _, r := range []struct {
		d transport.Direction
		b []byte
	}{{transport.Sent, []byte("abc")}, {transport.Received, big}, {transport.Sent, nil}} {
		if err := c.Record(r.d, r.b); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	f, _ := os.Open(path)
	defer f.Close()
	recs, err := transport.ReadCapture(f)
	if err != nil || len(recs) != 3 || string(recs[0].Envelope) != "abc" || !bytes.Equal(recs[1].Envelope, big) ||
		recs[1].Direction != transport.Received || len(recs[2].Envelope) != 0 {
		t.Errorf("ReadCapture = %v, %v", recs, err)
	}
	if nilc, err := transport.OpenCapture(""); nilc != nil || err != nil || nilc.Record(transport.Sent, []byte("x")) != nil {
		t.Error("an empty capture path should record nothing")
	}
	if _, err := transport.ReadCapture(strings.NewReader("?")); err == nil {
		t.Error("ReadCapture accepted a bad direction byte")
	}
}
