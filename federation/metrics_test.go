package federation

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/federation/wire"
)

// TestMetricsServe checks the names and values /metrics serves after some
// traffic, and that a nil *Metrics counts nothing.
func TestMetricsServe(t *testing.T) {
	e, err := wire.New(wire.Header{RunID: "r", Kind: wire.KindHello, Sender: "site1", Recipient: "coord"},
		[]wire.Tensor{{Name: "v", Shape: []int{3}, Values: []float64{1, 2, 3}}})
	if err != nil {
		t.Fatal(err)
	}
	var nilMetrics *Metrics
	nilMetrics.sent(e)
	if s := nilMetrics.Snapshot(); s != (Snapshot{}) {
		t.Errorf("nil metrics: %+v", s)
	}

	m := &Metrics{}
	m.sent(e)
	m.sent(e)
	m.received(e)
	m.dropped()
	m.round(1500 * time.Millisecond)
	m.round(time.Second)

	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	body := string(b)
	for _, want := range []string{
		"# TYPE crffd_rounds_total counter\ncrffd_rounds_total 2\n",
		"crffd_round_seconds_total 2.5\n",
		"crffd_payload_bytes_sent_total 48\n",
		"crffd_payload_bytes_received_total 24\n",
		"crffd_envelopes_sent_total 2\n",
		"crffd_envelopes_received_total 1\n",
		"# HELP crffd_envelopes_dropped_total Envelopes dropped (stale, duplicate, unknown).\n",
		"crffd_envelopes_dropped_total 1\n",
		"# TYPE go_goroutines gauge\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q", ct)
	}
}
