package spool_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crffd/crffd/certs"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/plugins/transport"
	"github.com/crffd/crffd/plugins/transport/spool"
)

// pki is a federation for tests: a CA with certificates for the
// coordinator, a second coordinator, site-a, site-b and site-c (revoked),
// all in one folder with the revocation list, and a certificate of
// another CA for site-a.
type pki struct {
	caDir, dir, otherDir string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{caDir: filepath.Join(t.TempDir(), "ca"), dir: t.TempDir(), otherDir: filepath.Join(t.TempDir(), "other")}
	if _, err := certs.InitCA(p.caDir); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"coordinator", "coordinator-2", "site-a", "site-b", "site-c"} {
		req := certs.Request{Name: n, Role: certs.RoleSite}
		if strings.HasPrefix(n, "coordinator") {
			req.Role, req.Hosts = certs.RoleCoordinator, []string{"127.0.0.1"}
		}
		if _, err := certs.Issue(p.caDir, p.dir, req); err != nil {
			t.Fatal(err)
		}
	}
	p.revoke(t, "site-c")
	if _, err := certs.InitCA(p.otherDir); err != nil {
		t.Fatal(err)
	}
	if _, err := certs.Issue(p.otherDir, p.otherDir, certs.Request{Name: "site-a", Role: certs.RoleSite}); err != nil {
		t.Fatal(err)
	}
	return p
}

// revoke revokes name's certificates and puts the list beside the
// daemons' files, replacing the old list by a rename.
func (p *pki) revoke(t *testing.T, name string) {
	t.Helper()
	if _, err := certs.Revoke(p.caDir, name, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(p.caDir, certs.CRLFile))
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(p.dir, ".crl.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(p.dir, certs.CRLFile)); err != nil {
		t.Fatal(err)
	}
}

func (p *pki) files(name string) certs.Files { return certs.FilesIn(p.dir, name) }

// key returns name's certificate and key, of this federation or, with
// other, of the other CA.
func (p *pki) key(t *testing.T, name string, other bool) tls.Certificate {
	t.Helper()
	f := p.files(name)
	if other {
		f = certs.FilesIn(p.otherDir, name)
	}
	c, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// logBuf is a goroutine-safe log sink.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func config(p *pki, name string, role transport.Role, opts map[string]string) transport.Config {
	cfg := transport.Config{Name: name, Role: role, CoordinatorName: "coordinator", Options: opts}
	if p != nil {
		cfg.TLS = p.files(name)
	}
	return cfg
}

// start configures a transport for name with p's files (none when p is
// nil) and returns it with its log.
func start(t *testing.T, p *pki, name string, role transport.Role, opts map[string]string) (*spool.Transport, *logBuf) {
	t.Helper()
	logs := &logBuf{}
	tr := spool.New(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if _, err := tr.Configure(context.Background(), config(p, name, role, opts)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr, logs
}

func env(t *testing.T, round uint64, from, to string, vals ...float64) *wire.Envelope {
	t.Helper()
	if len(vals) == 0 {
		vals = []float64{float64(round)}
	}
	e, err := wire.New(wire.Header{RunID: "run-1", Round: round, Kind: wire.KindWeights, Sender: from, Recipient: to},
		[]wire.Tensor{wire.Vector("x", vals)})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func marshal(t *testing.T, e *wire.Envelope) []byte {
	t.Helper()
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sign(t *testing.T, key tls.Certificate, envelope []byte) []byte {
	t.Helper()
	b, err := spool.SignFile(key, envelope)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stampSeq makes the file names of planted files unique.
var stampSeq uint64 = 5_000_000_000

// plant writes b into inbox as a file that names sender, with a time
// stamp of now, so that it sorts among the files sent around it.
func plant(t *testing.T, inbox, sender string, b []byte) string {
	t.Helper()
	stampSeq++
	name := fmt.Sprintf("%020d-%s-%010d.env", time.Now().UnixNano(), sender, stampSeq)
	tmp := filepath.Join(inbox, ".tmp-plant")
	if err := os.WriteFile(tmp, b, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(inbox, name)); err != nil {
		t.Fatal(err)
	}
	return name
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

// refusal returns the reason logged for refusing the file named name, or "".
func refusal(logs, name string) string {
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "refused an envelope file") && strings.Contains(line, name) {
			return line
		}
	}
	return ""
}

func TestDeliverInOrder(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	opts := map[string]string{spool.OptionDir: dir, spool.OptionPoll: "5ms"}
	coord, _ := start(t, p, "coordinator", transport.RoleCoordinator, opts)
	site, _ := start(t, p, "site-a", transport.RoleSite, opts)
	ctx := context.Background()
	for r := uint64(1); r <= 20; r++ {
		if err := coord.Send(ctx, env(t, r, "coordinator", "site-a")); err != nil {
			t.Fatal(err)
		}
	}
	// The files on disk are signed by the coordinator's key.
	onDisk := files(t, filepath.Join(dir, "site-a"))
	if len(onDisk) != 20 {
		t.Fatalf("site-a's inbox holds %v", onDisk)
	}
	b, err := os.ReadFile(filepath.Join(dir, "site-a", onDisk[0]))
	if err != nil {
		t.Fatal(err)
	}
	f, err := spool.DecodeFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := f.Verify(); err != nil || c.Subject.CommonName != "coordinator" {
		t.Errorf("file %s: signed by %v, %v", onDisk[0], c.Subject, err)
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
	p := newPKI(t)
	dir := t.TempDir()
	capture := filepath.Join(t.TempDir(), "cap.bin")
	site, _ := start(t, p, "site-a", transport.RoleSite, map[string]string{
		spool.OptionDir: dir, spool.OptionPoll: "5ms", spool.OptionArchive: "true", transport.OptionCapture: capture})
	coord, _ := start(t, p, "coordinator", transport.RoleCoordinator, map[string]string{spool.OptionDir: dir})
	inbox := filepath.Join(dir, "site-a")
	// Junk, a forged file name, an envelope for someone else, a temporary
	// file still being written and an old one left by a crashed writer.
	ck := p.key(t, "coordinator", false)
	os.WriteFile(filepath.Join(inbox, "00000000000000000001-coordinator-0000000001.env"), []byte("junk"), 0o600)
	forged := sign(t, ck, marshal(t, env(t, 5, "coordinator", "site-a")))
	os.WriteFile(filepath.Join(inbox, "00000000000000000002-site-b-0000000001.env"), forged, 0o600)
	other := sign(t, ck, marshal(t, env(t, 6, "coordinator", "site-b")))
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
	// The archive keeps the signed file.
	archived, _ := filepath.Glob(filepath.Join(inbox, ".archive", "*"))
	if len(archived) != 1 {
		t.Fatalf("archive holds %v", archived)
	}
	if b, err := os.ReadFile(archived[0]); err != nil || !bytes.HasPrefix(b, []byte(spool.Magic)) {
		t.Errorf("archived file is not a signed file: %v", err)
	}
	f, _ := os.Open(capture)
	defer f.Close()
	recs, err := transport.ReadCapture(f)
	if err != nil || len(recs) != 4 {
		t.Fatalf("capture: %d records, %v; want 4 (everything read)", len(recs), err)
	}
	// What the capture holds of a signed file is its envelope.
	if _, err := wire.Unmarshal(recs[3].Envelope); err != nil {
		t.Errorf("captured bytes of a delivered file are not an envelope: %v", err)
	}
}

// TestRefuseForged plants files that were not written with a valid key of
// their sender among genuine ones: each is moved to .rejected and logged
// with its reason, and the genuine files are delivered in order.
func TestRefuseForged(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	opts := func() map[string]string {
		return map[string]string{spool.OptionDir: dir, spool.OptionPoll: "5ms", spool.OptionArchive: "true"}
	}
	coord, coordLogs := start(t, p, "coordinator", transport.RoleCoordinator, opts())
	siteA, siteLogs := start(t, p, "site-a", transport.RoleSite, opts())
	// A value that must never reach a log line, even from a forged file.
	const secret = 13.579246801357913
	toCoord := func(from string) []byte { return marshal(t, env(t, 99, from, "coordinator", secret)) }
	toSite := func(from string) []byte { return marshal(t, env(t, 99, from, "site-a", secret)) }
	tampered := sign(t, p.key(t, "site-a", false), toCoord("site-a"))
	tampered[len(tampered)-3] ^= 1
	// site-a's certificate with a signature by another key.
	swapped, err := spool.DecodeFile(sign(t, p.key(t, "site-a", false), toCoord("site-a")))
	if err != nil {
		t.Fatal(err)
	}
	byOther, _ := spool.DecodeFile(sign(t, p.key(t, "site-a", true), toCoord("site-a")))
	swapped.Signature = byOther.Signature

	for _, tc := range []struct {
		name   string
		site   bool   // planted in site-a's inbox, else in the coordinator's
		sender string // in the file name
		file   []byte
		reason string
	}{
		{"unsigned", false, "site-a", toCoord("site-a"), "no \\\"crffd-spool-signed-v1\\\" header"},
		{"key of another CA", false, "site-a", sign(t, p.key(t, "site-a", true), toCoord("site-a")), "not issued by the federation CA"},
		{"revoked certificate", false, "site-c", sign(t, p.key(t, "site-c", false), toCoord("site-c")), "revocation list"},
		{"another site's certificate", false, "site-a", sign(t, p.key(t, "site-b", false), toCoord("site-a")), `file name names sender \"site-a\", but \"site-b\" signed it`},
		{"envelope of another site", false, "site-b", sign(t, p.key(t, "site-b", false), toCoord("site-a")), `envelope names sender \"site-a\", but \"site-b\" signed it`},
		{"tampered after signing", false, "site-a", tampered, "signature does not verify"},
		{"signature by another key", false, "site-a", swapped.Encode(), "signature does not verify"},
		{"coordinator certificate to the coordinator", false, "coordinator-2", sign(t, p.key(t, "coordinator-2", false), toCoord("coordinator-2")), "coordinator certificate, not a site's"},
		{"site certificate to a site", true, "site-b", sign(t, p.key(t, "site-b", false), toSite("site-b")), "site certificate, not a coordinator's"},
		{"another coordinator", true, "coordinator-2", sign(t, p.key(t, "coordinator-2", false), toSite("coordinator-2")), `sender \"coordinator-2\" is not the coordinator \"coordinator\"`},
		{"unparsable certificate", false, "site-a", (&spool.File{Certificate: []byte("junk"), Signature: []byte("x"), Envelope: toCoord("site-a")}).Encode(), "parse the signer's certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			recv, logs, inbox := coord, coordLogs, filepath.Join(dir, "coordinator")
			send := func(r uint64) error { return siteA.Send(ctx, env(t, r, "site-a", "coordinator")) }
			if tc.site {
				recv, logs, inbox = siteA, siteLogs, filepath.Join(dir, "site-a")
				send = func(r uint64) error { return coord.Send(ctx, env(t, r, "coordinator", "site-a")) }
			}
			if err := send(1); err != nil {
				t.Fatal(err)
			}
			name := plant(t, inbox, tc.sender, tc.file)
			if err := send(2); err != nil {
				t.Fatal(err)
			}
			got := receive(t, recv, 2)
			if got[0].Round != 1 || got[1].Round != 2 {
				t.Errorf("delivered rounds %d, %d; want the genuine 1, 2", got[0].Round, got[1].Round)
			}
			if _, err := os.Stat(filepath.Join(inbox, ".rejected", name)); err != nil {
				t.Errorf("forged file not in .rejected: %v; inbox: %v", err, files(t, inbox))
			}
			line := refusal(logs.String(), name)
			if !strings.Contains(line, tc.reason) {
				t.Errorf("log line for %s lacks %q: %q", name, tc.reason, line)
			}
		})
	}
	for _, l := range []*logBuf{coordLogs, siteLogs} {
		if s := l.String(); strings.Contains(s, "13.579") {
			t.Errorf("a payload value reached the log:\n%s", s)
		}
	}
}

// A revocation list that changes while the transport runs applies to the
// next file read.
func TestRevocationFollowed(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	opts := map[string]string{spool.OptionDir: dir, spool.OptionPoll: "5ms"}
	coord, logs := start(t, p, "coordinator", transport.RoleCoordinator, opts)
	siteB, _ := start(t, p, "site-b", transport.RoleSite, opts)
	ctx := context.Background()
	if err := siteB.Send(ctx, env(t, 1, "site-b", "coordinator")); err != nil {
		t.Fatal(err)
	}
	receive(t, coord, 1)
	p.revoke(t, "site-b")
	if err := siteB.Send(ctx, env(t, 2, "site-b", "coordinator")); err != nil {
		t.Fatal(err)
	}
	inbox := filepath.Join(dir, "coordinator")
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() {
		done <- coord.Receive(ctx, func(e *wire.Envelope) error { return fmt.Errorf("delivered %v", e) })
	}()
	refused := waitFor(10*time.Second, func() bool {
		m, _ := filepath.Glob(filepath.Join(inbox, ".rejected", "*-site-b-*"))
		return len(m) == 1
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Receive: %v", err)
	}
	if !refused {
		t.Fatalf("the file of a revoked site was not refused: %v\n%s", files(t, inbox), logs)
	}
	if !strings.Contains(logs.String(), "revocation list") {
		t.Errorf("no reason logged:\n%s", logs)
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// A file larger than any valid one is refused without being read.
func TestRefuseOversize(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	coord, logs := start(t, p, "coordinator", transport.RoleCoordinator, map[string]string{spool.OptionDir: dir, spool.OptionPoll: "5ms"})
	site, _ := start(t, p, "site-a", transport.RoleSite, map[string]string{spool.OptionDir: dir})
	inbox := filepath.Join(dir, "coordinator")
	name := plant(t, inbox, "site-a", nil)
	if err := os.Truncate(filepath.Join(inbox, name), int64(spool.MaxFileBytes)+1); err != nil { // sparse
		t.Fatal(err)
	}
	if err := site.Send(context.Background(), env(t, 1, "site-a", "coordinator")); err != nil {
		t.Fatal(err)
	}
	receive(t, coord, 1)
	if line := refusal(logs.String(), name); !strings.Contains(line, fmt.Sprintf("more than %d", spool.MaxFileBytes)) {
		t.Errorf("log line: %q", line)
	}
}

// With unsigned=true files are bare envelopes, and a signed file, which
// such a transport cannot check, is refused.
func TestUnsigned(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	opts := map[string]string{spool.OptionDir: dir, spool.OptionPoll: "5ms", spool.OptionUnsigned: "true"}
	coord, logs := start(t, nil, "coordinator", transport.RoleCoordinator, opts)
	site, _ := start(t, nil, "site-a", transport.RoleSite, opts)
	if !strings.Contains(logs.String(), "runs unsigned") {
		t.Errorf("no warning that the transport runs unsigned:\n%s", logs)
	}
	ctx := context.Background()
	if err := site.Send(ctx, env(t, 1, "site-a", "coordinator")); err != nil {
		t.Fatal(err)
	}
	inbox := filepath.Join(dir, "coordinator")
	name := plant(t, inbox, "site-a", sign(t, p.key(t, "site-a", false), marshal(t, env(t, 2, "site-a", "coordinator"))))
	if err := site.Send(ctx, env(t, 3, "site-a", "coordinator")); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, coord, 2); got[0].Round != 1 || got[1].Round != 3 {
		t.Errorf("delivered rounds %d, %d; want 1, 3", got[0].Round, got[1].Round)
	}
	if line := refusal(logs.String(), name); !strings.Contains(line, "runs with unsigned=true") {
		t.Errorf("log line: %q", line)
	}
	// A site knowing its coordinator refuses files of anyone else.
	if err := coord.Send(ctx, env(t, 4, "coordinator", "site-a")); err != nil {
		t.Fatal(err)
	}
	other := plant(t, filepath.Join(dir, "site-a"), "site-b", marshal(t, env(t, 5, "site-b", "site-a")))
	if err := coord.Send(ctx, env(t, 6, "coordinator", "site-a")); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, site, 2); got[0].Round != 4 || got[1].Round != 6 {
		t.Errorf("site delivered rounds %d, %d; want 4, 6", got[0].Round, got[1].Round)
	}
	if _, err := os.Stat(filepath.Join(dir, "site-a", ".rejected", other)); err != nil {
		t.Errorf("file of another site not refused: %v", err)
	}
}

func TestDeliverErrorKeepsFile(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	opts := map[string]string{spool.OptionDir: dir, spool.OptionPoll: "5ms"}
	site, _ := start(t, p, "site-a", transport.RoleSite, opts)
	coord, _ := start(t, p, "coordinator", transport.RoleCoordinator, opts)
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
	p := newPKI(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o600)
	withDir := func(kv ...string) map[string]string {
		m := map[string]string{spool.OptionDir: dir}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	site := func(opts map[string]string) transport.Config { return config(p, "site-a", transport.RoleSite, opts) }
	without := func(cfg transport.Config, edit func(*certs.Files)) transport.Config {
		edit(&cfg.TLS)
		return cfg
	}
	noCoordinator := site(withDir())
	noCoordinator.CoordinatorName = ""
	siteAsCoordinator := site(withDir())
	siteAsCoordinator.Role = transport.RoleCoordinator
	unsignedCRL := config(nil, "site-a", transport.RoleSite, withDir(spool.OptionUnsigned, "true"))
	unsignedCRL.TLS.CRL = filepath.Join(p.dir, certs.CRLFile)
	for _, tc := range []struct {
		name string
		cfg  transport.Config
		msg  string
	}{
		{"no dir", site(map[string]string{}), "required"},
		{"missing dir", site(withDir(spool.OptionDir, filepath.Join(dir, "absent"))), "not a directory"},
		{"file", site(withDir(spool.OptionDir, file)), "not a directory"},
		{"poll", site(withDir(spool.OptionPoll, "-1s")), "poll"},
		{"archive", site(withDir(spool.OptionArchive, "maybe")), "archive"},
		{"unsigned value", site(withDir(spool.OptionUnsigned, "maybe")), "unsigned"},
		{"unknown", site(withDir("addr", "x")), "unknown option"},
		{"no certificate files", config(nil, "site-a", transport.RoleSite, withDir()), "no TLS.CA file (federation.tls.ca)"},
		{"no certificate files says how to run unsigned", config(nil, "site-a", transport.RoleSite, withDir()), "unsigned=true"},
		{"no certificate", without(site(withDir()), func(f *certs.Files) { f.Cert = "" }), "no TLS.Cert file (federation.tls.cert)"},
		{"no key", without(site(withDir()), func(f *certs.Files) { f.Key = "" }), "no TLS.Key file (federation.tls.key)"},
		{"unsigned with certificate files", site(withDir(spool.OptionUnsigned, "true")), "drop the option"},
		{"unsigned with a revocation list", unsignedCRL, "drop the option"},
		{"CA file missing", without(site(withDir()), func(f *certs.Files) { f.CA = filepath.Join(dir, "absent.crt") }), "read CA certificate"},
		{"certificate of another daemon", without(site(withDir()), func(f *certs.Files) { *f = p.files("site-b") }), `names "site-b", but this daemon is configured as "site-a"`},
		{"certificate of another role", siteAsCoordinator, "site certificate, not a coordinator's"},
		{"own certificate revoked", config(p, "site-c", transport.RoleSite, withDir()), "revocation list"},
		{"site without coordinator name", noCoordinator, "no coordinator name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := spool.New(nil).Configure(context.Background(), tc.cfg)
			if !errors.Is(err, transport.ErrConfig) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Configure: %v, want ErrConfig containing %q", err, tc.msg)
			}
		})
	}
	tr := spool.New(nil)
	if err := tr.Send(context.Background(), env(t, 1, "site-a", "coordinator")); !errors.Is(err, transport.ErrNotConfigured) {
		t.Errorf("Send before Configure: %v", err)
	}
	if _, err := tr.Configure(context.Background(), site(withDir())); err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.Configure(context.Background(), site(withDir())); !errors.Is(err, transport.ErrConfig) || !strings.Contains(err.Error(), "configured already") {
		t.Errorf("second Configure: %v", err)
	}
	if err := tr.Send(context.Background(), env(t, 1, "site-b", "site-a")); !errors.Is(err, transport.ErrRecipient) {
		t.Errorf("Send to itself: %v", err)
	}
}
