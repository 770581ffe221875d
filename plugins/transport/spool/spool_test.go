package spool_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/plugins/transport"
	"github.com/crffd/crffd/plugins/transport/spool"
)

func start(t *testing.T, name string, role transport.Role, opts map[string]string) *spool.Transport {
	t.Helper()
	tr := spool.New(nil)
	if _, err := tr.Configure(context.Background(), transport.Config{Name: name, Role: role, Options: opts}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func env(t *testing.T, round uint64, from, to string) *wire.Envelope {
	t.Helper()
	e, err := wire.New(wire.Header{RunID: "run-1", Round: round, Kind: wire.KindWeights, Sender: from, Recipient: to},
		[]wire.Tensor{wire.Scalar("x", float64(round))})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// receive collects n envelopes from tr, or fails after a timeout.
func receive(t *testing.T, tr *spool.Transport, n int) []*wire.Envelope {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []*wire.Envelope
	err := tr.Receive(ctx, func(e *wire.Envelope) error {
		got = append(got, e)
		if len(got) == n {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || len(got) != n {
		t.Fatalf("Receive: %v after %d envelopes, want %d", err, len(got), n)
	}
	return got
}

// files lists every file under dir, relative to it.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

func TestDeliverInOrder(t *testing.T) {
	dir := t.TempDir()
	opts := map[string]string{spool.OptionDir: dir, spool.OptionPoll: "5ms"}
	coord := start(t, "coordinator", transport.RoleCoordinator, opts)
	site := start(t, "site-a", transport.RoleSite, opts)
	ctx := context.Background()
	for r := uint64(1); r <= 20; r++ {
		if err := coord.Send(ctx, env(t, r, "coordinator", "site-a")); err != nil {
			t.Fatal(err)
		}
	}
	for i, e := range receive(t, site, 20) {
		if e.Round != uint64(i+1) {
			t.Fatalf("envelope %d is round %d", i, e.Round)
		}
	}
	if err := site.Send(ctx, env(t, 21, "site-a", "coordinator")); err != nil {
		t.Fatal(err)
	}
	if e := receive(t, coord, 1)[0]; e.Sender != "site-a" || e.Round != 21 {
		t.Errorf("coordinator received %v", e)
	}
	if left := files(t, dir); len(left) != 0 {
		t.Errorf("files left after delivery: %v", left)
	}
}

func TestArchiveAndReject(t *testing.T) {
	dir := t.TempDir()
	capture := filepath.Join(t.TempDir(), "cap.bin")
	site := start(t, "site-a", transport.RoleSite, map[string]string{
		spool.OptionDir: dir, spool.OptionPoll: "5ms", spool.OptionArchive: "true", transport.OptionCapture: capture})
	coord := start(t, "coordinator", transport.RoleCoordinator, map[string]string{spool.OptionDir: dir})
	inbox := filepath.Join(dir, "site-a")
	// Junk, a forged file name, an envelope for someone else, a temporary
	// file still being written and an old one left by a crashed writer.
	os.WriteFile(filepath.Join(inbox, "00000000000000000001-coordinator-0000000001.env"), []byte("junk"), 0o600)
	forged, _ := env(t, 5, "coordinator", "site-a").Marshal()
	os.WriteFile(filepath.Join(inbox, "00000000000000000002-site-b-0000000001.env"), forged, 0o600)
	other, _ := env(t, 6, "coordinator", "site-b").Marshal()
	os.WriteFile(filepath.Join(inbox, "00000000000000000003-coordinator-0000000002.env"), other, 0o600)
	os.WriteFile(filepath.Join(inbox, ".tmp-fresh"), []byte("partial"), 0o600)
	old := filepath.Join(inbox, ".tmp-old")
	os.WriteFile(old, []byte("partial"), 0o600)
	long := time.Now().Add(-2 * time.Hour)
	os.Chtimes(old, long, long)

	if err := coord.Send(context.Background(), env(t, 7, "coordinator", "site-a")); err != nil {
		t.Fatal(err)
	}
	if e := receive(t, site, 1)[0]; e.Round != 7 {
		t.Errorf("received round %d, want 7", e.Round)
	}
	got := strings.Join(files(t, inbox), " ")
	for _, want := range []string{".archive/", ".rejected/00000000000000000001-", ".rejected/00000000000000000002-site-b", ".rejected/00000000000000000003-", ".tmp-fresh"} {
		if !strings.Contains(got, want) {
			t.Errorf("inbox lacks %s: %s", want, got)
		}
	}
	if strings.Contains(got, ".tmp-old") {
		t.Errorf("stale temporary file not removed: %s", got)
	}
	f, _ := os.Open(capture)
	defer f.Close()
	if recs, err := transport.ReadCapture(f); err != nil || len(recs) != 4 {
		t.Errorf("capture: %d records, %v; want 4 (everything read)", len(recs), err)
	}
}

func TestDeliverErrorKeepsFile(t *testing.T) {
	dir := t.TempDir()
	opts := map[string]string{spool.OptionDir: dir, spool.OptionPoll: "5ms"}
	site := start(t, "site-a", transport.RoleSite, opts)
	coord := start(t, "coordinator", transport.RoleCoordinator, opts)
	coord.Send(context.Background(), env(t, 1, "coordinator", "site-a"))
	boom := errors.New("host went away")
	if err := site.Receive(context.Background(), func(*wire.Envelope) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Receive = %v", err)
	}
	if e := receive(t, site, 1)[0]; e.Round != 1 {
		t.Errorf("second Receive got round %d", e.Round)
	}
}

func TestConfigure(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o600)
	for _, tc := range []struct {
		name string
		opts map[string]string
		msg  string
	}{
		{"no dir", map[string]string{}, "required"},
		{"missing dir", map[string]string{spool.OptionDir: filepath.Join(dir, "absent")}, "not a directory"},
		{"file", map[string]string{spool.OptionDir: file}, "not a directory"},
		{"poll", map[string]string{spool.OptionDir: dir, spool.OptionPoll: "-1s"}, "poll"},
		{"archive", map[string]string{spool.OptionDir: dir, spool.OptionArchive: "maybe"}, "archive"},
		{"unknown", map[string]string{spool.OptionDir: dir, "addr": "x"}, "unknown option"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := spool.New(nil).Configure(context.Background(), transport.Config{Name: "site-a", Role: transport.RoleSite, Options: tc.opts})
			if !errors.Is(err, transport.ErrConfig) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Configure: %v, want ErrConfig containing %q", err, tc.msg)
			}
		})
	}
	if err := spool.New(nil).Send(context.Background(), env(t, 1, "site-a", "coordinator")); !errors.Is(err, transport.ErrNotConfigured) {
		t.Errorf("Send before Configure: %v", err)
	}
}
