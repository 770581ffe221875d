package daemon

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/crffd/crffd/certs"
	"github.com/crffd/crffd/federation"
)

// TestHealthCertificate: a daemon whose certificate expires in 3 days is
// not ready (503, with the reason), one with 30 days left is; a
// certificate that cannot be read is not; /metrics gives the days left.
func TestHealthCertificate(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca")
	if _, err := certs.InitCA(ca); err != nil {
		t.Fatal(err)
	}
	issue := func(name string, days int) string {
		out := filepath.Join(t.TempDir(), name)
		if _, err := certs.Issue(ca, out, certs.Request{Name: name, Role: certs.RoleSite, Validity: time.Duration(days) * 24 * time.Hour}); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(out, name+".crt")
	}
	for _, c := range []struct {
		name   string
		file   string
		code   int
		days   float64 // NaN-free expected gauge, -1: none checked
		reason string
	}{
		{"3 days", issue("soon", 3), http.StatusServiceUnavailable, 3, "certificate expires in 3.0 days"},
		{"30 days", issue("later", 30), http.StatusOK, 30, ""},
		{"unreadable", filepath.Join(t.TempDir(), "missing.crt"), http.StatusServiceUnavailable, -1, "certificate: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(newHealthMux(Health{Role: "site", CertFile: c.file}, &federation.Metrics{}))
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			var h struct {
				Status  string
				Reasons []string
			}
			err = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if err != nil || resp.StatusCode != c.code {
				t.Fatalf("status %d (%v), want %d", resp.StatusCode, err, c.code)
			}
			if c.reason == "" && (h.Status != "ok" || len(h.Reasons) != 0) || c.reason != "" && (h.Status != "not ready" || len(h.Reasons) != 1 || !regexp.MustCompile(regexp.QuoteMeta(c.reason)).MatchString(h.Reasons[0])) {
				t.Errorf("health %+v, want reason %q", h, c.reason)
			}
			resp, err = http.Get(srv.URL + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			m := regexp.MustCompile(`(?m)^crffd_certificate_days_left (\S+)$`).FindSubmatch(b)
			if m == nil {
				t.Fatalf("no crffd_certificate_days_left in\n%s", b)
			}
			if c.days >= 0 {
				if got, err := strconv.ParseFloat(string(m[1]), 64); err != nil || got > c.days || got < c.days-0.01 {
					t.Errorf("crffd_certificate_days_left %s, want %v", m[1], c.days)
				}
			} else if string(m[1]) != "NaN" {
				t.Errorf("crffd_certificate_days_left %s of an unreadable certificate, want NaN", m[1])
			}
		})
	}
}
