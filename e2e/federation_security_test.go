package e2e

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/certs"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/plugins/transport/spool"
)

// editFile replaces old by new in a file of dir, once each pair.
func editFile(t *testing.T, path string, repl ...string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for i := 0; i < len(repl); i += 2 {
		if !strings.Contains(s, repl[i]) {
			t.Fatalf("%s lacks %q", path, repl[i])
		}
		s = strings.Replace(s, repl[i], repl[i+1], 1)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFederationSecurity is issue 5's security acceptance over grpc: a site
// with a certificate of another CA, and a site whose certificate names
// another site, are refused with a clear reason in the coordinator's log,
// and the run stops naming the site; a replayed envelope of an earlier
// round (over the spool, where a file can be replayed) is dropped as stale
// and the run completes.
func TestFederationSecurity(t *testing.T) {
	short := func(t *testing.T, dir string) {
		editFile(t, filepath.Join(dir, "coordinator.yaml"), "round_timeout: 30s", "round_timeout: 2s", "retries: 3", "retries: 1")
	}
	t.Run("other CA", func(t *testing.T) {
		dir := sandbox(t, 2, 60, "grpc")
		short(t, dir)
		other := filepath.Join(dir, "other")
		crffd(t, nil, "certs", "init", "--dir", other).mustSucceed(t)
		crffd(t, nil, "certs", "issue", "site2", "--dir", other).mustSucceed(t)
		// site2 trusts both CAs, so that its own transport accepts its
		// certificate and the coordinator's: the refusal is the coordinator's.
		both := filepath.Join(other, "both.crt")
		var pem []byte
		for _, f := range []string{filepath.Join(other, "ca.crt"), filepath.Join(dir, "certs", "site2", "ca.crt")} {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			pem = append(pem, b...)
		}
		if err := os.WriteFile(both, pem, 0o644); err != nil {
			t.Fatal(err)
		}
		editFile(t, filepath.Join(dir, "site2.yaml"),
			"ca: certs/site2/ca.crt", "ca: other/both.crt", "cert: certs/site2/site2.crt", "cert: other/site2.crt", "key: certs/site2/site2.key", "key: other/site2.key")
		s1 := startDaemon(t, "site1", "site", "--config", filepath.Join(dir, "site1.yaml"), "--once")
		s2 := startDaemon(t, "site2", "site", "--config", filepath.Join(dir, "site2.yaml"), "--once")
		coord := startDaemon(t, "coordinator", "coordinator", "--config", filepath.Join(dir, "coordinator.yaml"), "--once")
		if code := coord.wait(t, time.Minute); code == 0 {
			t.Fatal("coordinator accepted a site of another CA")
		}
		log := coord.err.String()
		for _, want := range []string{"TLS handshake failed", "certificate signed by unknown authority", "site silent: [site2]"} {
			if !strings.Contains(log, want) {
				t.Errorf("coordinator log lacks %q:\n%s", want, log)
			}
		}
		s1.wait(t, 30*time.Second)
		_ = s2.cmd.Process.Signal(os.Interrupt)
		s2.wait(t, 30*time.Second)
	})
	t.Run("name mismatch", func(t *testing.T) {
		dir := sandbox(t, 2, 60, "grpc")
		short(t, dir)
		// site2's daemon presents site1's certificate.
		editFile(t, filepath.Join(dir, "site2.yaml"),
			"ca: certs/site2/ca.crt", "ca: certs/site1/ca.crt", "cert: certs/site2/site2.crt", "cert: certs/site1/site1.crt", "key: certs/site2/site2.key", "key: certs/site1/site1.key")
		// Its own transport refuses to send under a name its certificate
		// does not carry; a forged sender on a raw stream is refused by the
		// coordinator's transport (TestTransportGRPC).
		s2 := startDaemon(t, "site2", "site", "--config", filepath.Join(dir, "site2.yaml"), "--once")
		if code := s2.wait(t, time.Minute); code == 0 {
			t.Fatal("site2 ran with site1's certificate")
		}
		if want := `names "site1", but this daemon is configured as "site2"`; !strings.Contains(s2.err.String(), want) {
			t.Errorf("site2's error lacks %q:\n%s", want, s2.err.String())
		}
		coord := startDaemon(t, "coordinator", "coordinator", "--config", filepath.Join(dir, "coordinator.yaml"), "--once")
		if code := coord.wait(t, time.Minute); code == 0 || !strings.Contains(coord.err.String(), "site2] did not answer") {
			t.Errorf("coordinator exited %d:\n%s", code, coord.err.String())
		}
	})
	t.Run("replayed envelope", func(t *testing.T) {
		const sites = 2
		dir := sandbox(t, sites, 60, "spool")
		var ds []*daemon
		for k := 1; k <= sites; k++ {
			ds = append(ds, startDaemon(t, fmt.Sprintf("site%d", k), "site", "--config", filepath.Join(dir, fmt.Sprintf("site%d.yaml", k)), "--once"))
		}
		coord := startDaemon(t, "coordinator", "coordinator", "--config", filepath.Join(dir, "coordinator.yaml"), "--once")
		archive := filepath.Join(dir, "spool", "coordinator", ".archive")
		var first string
		if !waitFor(2*time.Minute, func() bool {
			m, _ := filepath.Glob(filepath.Join(archive, "*-site1-*.env"))
			if len(m) >= 6 {
				first = m[2] // a gradient of an early round
				return true
			}
			return false
		}) {
			t.Fatalf("no archived envelopes:\n%s", coord.err.String())
		}
		b, err := os.ReadFile(first)
		if err != nil {
			t.Fatal(err)
		}
		plantSpoolFile(t, filepath.Join(dir, "spool", "coordinator"), "site1", b)
		coord.mustSucceed(t, 3*time.Minute)
		for _, d := range ds {
			d.mustSucceed(t, time.Minute)
		}
		log := coord.err.String()
		if !strings.Contains(log, "envelope dropped") || !strings.Contains(log, "stale") {
			t.Errorf("the replayed envelope was not dropped as stale:\n%s", log)
		}
		checkSiteResults(t, dir, sites)
	})
}

// plantSpoolFile writes b into a spool inbox as a file from sender, the
// way a transport does (a dot file renamed), and returns its name.
func plantSpoolFile(t *testing.T, inbox, sender string, b []byte) string {
	t.Helper()
	name := fmt.Sprintf("%020d-%s-%010d.env", time.Now().UnixNano(), sender, 9999999999)
	tmp := filepath.Join(inbox, ".plant-"+name)
	if err := os.WriteFile(tmp, b, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(inbox, name)); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestFederationForgedSpool is issue 31's acceptance for the spool: files
// planted in the inboxes during a run without a valid key of the sender
// they name (unsigned, signed with another CA's key or another site's,
// tampered with after signing, or a site's signature on a coordinator's
// file) are refused, moved to .rejected and logged with the reason, and
// the run completes with the genuine files.
func TestFederationForgedSpool(t *testing.T) {
	const sites = 2
	dir := sandbox(t, sites, 60, "spool")
	other := filepath.Join(dir, "other")
	crffd(t, nil, "certs", "init", "--dir", other).mustSucceed(t)
	crffd(t, nil, "certs", "issue", "site1", "--dir", other).mustSucceed(t)
	keyOf := func(certDir, name string) tls.Certificate {
		t.Helper()
		f := certs.FilesIn(certDir, name)
		c, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	var ds []*daemon
	for k := 1; k <= sites; k++ {
		ds = append(ds, startDaemon(t, fmt.Sprintf("site%d", k), "site", "--config", filepath.Join(dir, fmt.Sprintf("site%d.yaml", k)), "--once"))
	}
	coord := startDaemon(t, "coordinator", "coordinator", "--config", filepath.Join(dir, "coordinator.yaml"), "--once")
	coordInbox, site2Inbox := filepath.Join(dir, "spool", "coordinator"), filepath.Join(dir, "spool", "site2")
	// Genuine files to forge from, once a few rounds have passed.
	var fromSite, fromCoord string
	if !waitFor(2*time.Minute, func() bool {
		a, _ := filepath.Glob(filepath.Join(coordInbox, ".archive", "*-site1-*.env"))
		b, _ := filepath.Glob(filepath.Join(site2Inbox, ".archive", "*-coordinator-*.env"))
		if len(a) >= 6 && len(b) >= 6 {
			fromSite, fromCoord = a[len(a)-1], b[len(b)-1]
			return true
		}
		return false
	}) {
		t.Fatalf("no archived envelopes:\n%s", coord.err.String())
	}
	// forge returns the envelope of a genuine file with its values
	// inflated, as an attacker would send it, and the genuine file.
	forge := func(path string) (forged, genuine []byte) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := spool.DecodeFile(b)
		if err != nil {
			t.Fatal(err)
		}
		e, err := wire.Unmarshal(f.Envelope)
		if err != nil {
			t.Fatal(err)
		}
		var ts []wire.Tensor
		for _, x := range e.Tensors() {
			v := make([]float64, len(x.Values))
			for i := range v {
				v[i] = x.Values[i]*1e6 + 1
			}
			ts = append(ts, wire.Tensor{Name: x.Name, Shape: x.Shape, Values: v})
		}
		fe, err := wire.New(e.Header, ts, e.DigestLists()...)
		if err != nil {
			t.Fatal(err)
		}
		if forged, err = fe.Marshal(); err != nil {
			t.Fatal(err)
		}
		return forged, b
	}
	sign := func(key tls.Certificate, envelope []byte) []byte {
		t.Helper()
		b, err := spool.SignFile(key, envelope)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	forgedGradient, genuine := forge(fromSite)
	tampered := append([]byte(nil), genuine...)
	tampered[len(tampered)-1] ^= 1
	forgedWeights, _ := forge(fromCoord)
	type planted struct{ daemon, file, reason string }
	var plants []planted
	for _, p := range []struct {
		inbox, sender string
		file          []byte
		reason        string
	}{
		{coordInbox, "site1", forgedGradient, "crffd-spool-signed-v1"},
		{coordInbox, "site1", sign(keyOf(other, "site1"), forgedGradient), "not issued by the federation CA"},
		{coordInbox, "site1", sign(keyOf(filepath.Join(dir, "certs", "site2"), "site2"), forgedGradient), "signed it"},
		{coordInbox, "site1", tampered, "signature does not verify"},
		{site2Inbox, "coordinator", sign(keyOf(filepath.Join(dir, "certs", "site1"), "site1"), forgedWeights), "site certificate, not a coordinator"},
	} {
		who := "coordinator"
		if p.inbox == site2Inbox {
			who = "site2"
		}
		plants = append(plants, planted{who, filepath.Join(p.inbox, ".rejected", plantSpoolFile(t, p.inbox, p.sender, p.file)), p.reason})
		time.Sleep(time.Millisecond) // distinct time stamps
	}
	coord.mustSucceed(t, 3*time.Minute)
	for _, d := range ds {
		d.mustSucceed(t, time.Minute)
	}
	checkSiteResults(t, dir, sites)
	logs := map[string]string{"coordinator": coord.err.String(), "site2": ds[1].err.String()}
	for _, p := range plants {
		if _, err := os.Stat(p.file); err != nil {
			t.Errorf("forged file not in .rejected: %v", err)
		}
		line := ""
		for _, l := range strings.Split(logs[p.daemon], "\n") {
			if strings.Contains(l, "refused an envelope file") && strings.Contains(l, filepath.Base(p.file)) {
				line = l
			}
		}
		if !strings.Contains(line, p.reason) {
			t.Errorf("%s's log line for %s lacks %q: %q", p.daemon, filepath.Base(p.file), p.reason, line)
		}
	}
}

// TestFederationDeduplication is issue 5's de-duplication acceptance: 20
// identities planted at two sites are kept once (at the site listed first),
// and the coordinator's log and tables hold only HMACs.
func TestFederationDeduplication(t *testing.T) {
	const sites, rows, planted = 3, 60, 20
	dir := sandbox(t, sites, rows, "grpc")
	for k := 1; k <= sites; k++ {
		db := openDB(t, filepath.Join(dir, fmt.Sprintf("site%d.sqlite", k)))
		if _, err := db.Exec(`ALTER TABLE records ADD COLUMN patient TEXT`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`UPDATE records SET patient = 'person-' || ? || '-' || id`, k); err != nil {
			t.Fatal(err)
		}
		if k == 2 {
			// The same people as site1's rows 1..20, written differently.
			if _, err := db.Exec(`UPDATE records SET patient = ' PERSON-1-' || id || '  ' WHERE id <= ?`, planted); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
		editFile(t, filepath.Join(dir, fmt.Sprintf("site%d.yaml", k)), "  on_invalid: refuse\n", "  on_invalid: refuse\n  identity_columns: [patient]\n")
	}
	secret := []string{"CRFFD_FEDERATION_SECRET=shared by the sites only"}
	var ds []*daemon
	for k := 1; k <= sites; k++ {
		ds = append(ds, startDaemonEnv(t, fmt.Sprintf("site%d", k), secret, "site", "--config", filepath.Join(dir, fmt.Sprintf("site%d.yaml", k)), "--once"))
	}
	coord := startDaemon(t, "coordinator", "coordinator", "--config", filepath.Join(dir, "coordinator.yaml"), "--once")
	coord.mustSucceed(t, 3*time.Minute)
	for _, d := range ds {
		d.mustSucceed(t, time.Minute)
	}
	checkSiteResults(t, dir, sites)
	for k, want := range []float64{rows, rows - planted, rows} {
		db := openDB(t, filepath.Join(dir, fmt.Sprintf("site%d.sqlite", k+1)))
		if n := queryFloat(t, db, `SELECT n FROM crff_ate WHERE scope = 'local'`); n != want {
			t.Errorf("site%d: local ATE over %v rows, want %v", k+1, n, want)
		}
		if n := queryFloat(t, db, `SELECT COUNT(*) FROM crff_cate`); n != rows {
			t.Errorf("site%d: %v CATEs, want every row (%d)", k+1, n, rows)
		}
	}
	log := coord.err.String()
	if !strings.Contains(log, fmt.Sprintf("repeats=%d", planted)) {
		t.Errorf("coordinator log does not report %d repeats:\n%s", planted, log)
	}
	// Only HMACs reach the coordinator: no identity in its log, its file or
	// anything carried.
	scan := func(name string, b []byte) {
		for _, p := range []string{"person-", "PERSON-"} {
			if strings.Contains(string(b), p) {
				t.Errorf("%s holds identity text %q", name, p)
			}
		}
	}
	scan("coordinator log", []byte(log))
	// Column fingerprints are keyed with the secret: a coordinator that
	// hashes the sites' column names as an unkeyed fingerprint would finds
	// none of them.
	var guesses [][32]byte
	db := openDB(t, filepath.Join(dir, "site1.sqlite"))
	rowsOf, err := db.Query(`SELECT name FROM pragma_table_info('records')`)
	if err != nil {
		t.Fatal(err)
	}
	for rowsOf.Next() {
		var name string
		if err := rowsOf.Scan(&name); err != nil {
			t.Fatal(err)
		}
		for _, bin := range []bool{false, true} {
			guesses = append(guesses, sha256.Sum256(fmt.Appendf(nil, "crffd/column\x00%s\x00binary=%t", name, bin)))
		}
	}
	rowsOf.Close()
	db.Close()
	if len(guesses) < 8 {
		t.Fatalf("only %d column-name guesses", len(guesses))
	}
	for _, f := range []string{"coordinator.sqlite", "coordinator.capture", "site1.capture", "site2.capture"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		scan(f, b)
		for _, g := range guesses {
			if bytes.Contains(b, g[:]) {
				t.Errorf("%s holds the unkeyed fingerprint of a column name", f)
				break
			}
		}
	}
}
