package federation

import (
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/crffd/crffd/federation/wire"
)

// Metrics counts a daemon's federation traffic and rounds, and serves them
// in the Prometheus text format. A nil *Metrics counts nothing. Bytes are
// payload bytes (wire.Envelope.PayloadBytes): 8 per value, 32 per digest.
type Metrics struct {
	mu               sync.Mutex
	rounds           int
	seconds          float64
	sentBytes, recvB int64
	sentEnv, recvEnv int64
	droppedEnv       int64
}

func (m *Metrics) sent(e *wire.Envelope) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sentEnv++
	m.sentBytes += int64(e.PayloadBytes())
}

func (m *Metrics) received(e *wire.Envelope) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recvEnv++
	m.recvB += int64(e.PayloadBytes())
}

func (m *Metrics) dropped() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.droppedEnv++
}

func (m *Metrics) round(d time.Duration) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rounds++
	m.seconds += d.Seconds()
}

// Snapshot is a copy of the counters.
type Snapshot struct {
	Rounds                      int
	RoundSeconds                float64
	BytesSent, BytesReceived    int64
	EnvelopesSent, EnvelopesRcv int64
	EnvelopesDropped            int64
}

// Snapshot returns the current counters.
func (m *Metrics) Snapshot() Snapshot {
	if m == nil {
		return Snapshot{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return Snapshot{m.rounds, m.seconds, m.sentBytes, m.recvB, m.sentEnv, m.recvEnv, m.droppedEnv}
}

// ServeHTTP writes the metrics in the Prometheus text exposition format.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s := m.Snapshot()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# HELP crffd_rounds_total Training rounds completed.\n# TYPE crffd_rounds_total counter\ncrffd_rounds_total %d\n", s.Rounds)
	fmt.Fprintf(w, "# HELP crffd_round_seconds_total Seconds spent in training rounds.\n# TYPE crffd_round_seconds_total counter\ncrffd_round_seconds_total %g\n", s.RoundSeconds)
	fmt.Fprintf(w, "# HELP crffd_payload_bytes_sent_total Payload bytes of envelopes sent.\n# TYPE crffd_payload_bytes_sent_total counter\ncrffd_payload_bytes_sent_total %d\n", s.BytesSent)
	fmt.Fprintf(w, "# HELP crffd_payload_bytes_received_total Payload bytes of envelopes received.\n# TYPE crffd_payload_bytes_received_total counter\ncrffd_payload_bytes_received_total %d\n", s.BytesReceived)
	fmt.Fprintf(w, "# HELP crffd_envelopes_sent_total Envelopes sent.\n# TYPE crffd_envelopes_sent_total counter\ncrffd_envelopes_sent_total %d\n", s.EnvelopesSent)
	fmt.Fprintf(w, "# HELP crffd_envelopes_received_total Envelopes received.\n# TYPE crffd_envelopes_received_total counter\ncrffd_envelopes_received_total %d\n", s.EnvelopesRcv)
	fmt.Fprintf(w, "# HELP crffd_envelopes_dropped_total Envelopes dropped (stale, duplicate, unknown).\n# TYPE crffd_envelopes_dropped_total counter\ncrffd_envelopes_dropped_total %d\n", s.EnvelopesDropped)
	// The Go client library's name, so that a daemon that leaks goroutines
	// over months of runs shows it on the usual dashboards.
	fmt.Fprintf(w, "# HELP go_goroutines Number of goroutines that currently exist.\n# TYPE go_goroutines gauge\ngo_goroutines %d\n", runtime.NumGoroutine())
}
