package federation

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/crffd/crffd/federation/wire"
)

// Metrics counts a daemon's federation traffic and rounds, and serves them
// to Prometheus through its client library. Its zero value is ready to
// use; a nil *Metrics counts nothing. Bytes are
// payload bytes (wire.Envelope.PayloadBytes): 8 per value, 32 per digest.
type Metrics struct {
	mu               sync.Mutex
	rounds           int
	seconds          float64
	sentBytes, recvB int64
	sentEnv, recvEnv int64
	droppedEnv       int64

	once    sync.Once    // builds handler on the first scrape
	handler http.Handler // the registry's, in ServeHTTP
	extra   []prometheus.Collector
}

// Add adds collectors of the daemon's own (its certificate's days left,
// its runs' outcomes) to those ServeHTTP serves. It must be called before
// the first scrape.
func (m *Metrics) Add(cs ...prometheus.Collector) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.extra = append(m.extra, cs...)
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

// ServeHTTP serves the metrics in the Prometheus exposition formats, with
// the Go runtime's (go_goroutines and the other go_ metrics of the client
// library's Go collector), so that a daemon that leaks goroutines over
// months of runs shows it on the usual dashboards.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.once.Do(m.register)
	m.handler.ServeHTTP(w, r)
}

// register builds the registry behind ServeHTTP. The counters read the
// same fields as Snapshot, under the same lock, when scraped.
func (m *Metrics) register() {
	reg := prometheus.NewRegistry()
	counter := func(name, help string, v func(Snapshot) float64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return v(m.Snapshot()) }))
	}
	counter("crffd_rounds_total", "Training rounds completed.", func(s Snapshot) float64 { return float64(s.Rounds) })
	counter("crffd_round_seconds_total", "Seconds spent in training rounds.", func(s Snapshot) float64 { return s.RoundSeconds })
	counter("crffd_payload_bytes_sent_total", "Payload bytes of envelopes sent.", func(s Snapshot) float64 { return float64(s.BytesSent) })
	counter("crffd_payload_bytes_received_total", "Payload bytes of envelopes received.", func(s Snapshot) float64 { return float64(s.BytesReceived) })
	counter("crffd_envelopes_sent_total", "Envelopes sent.", func(s Snapshot) float64 { return float64(s.EnvelopesSent) })
	counter("crffd_envelopes_received_total", "Envelopes received.", func(s Snapshot) float64 { return float64(s.EnvelopesRcv) })
	counter("crffd_envelopes_dropped_total", "Envelopes dropped (stale, duplicate, unknown).", func(s Snapshot) float64 { return float64(s.EnvelopesDropped) })
	reg.MustRegister(collectors.NewGoCollector())
	m.mu.Lock()
	reg.MustRegister(m.extra...)
	m.mu.Unlock()
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
