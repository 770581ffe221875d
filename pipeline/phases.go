package pipeline

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/crffd/crffd/estimator"
)

// Phases are the wall times of a fit's steps (reading, training each
// model, selecting, cross-fitting, scoring, writing), in the order each
// was first timed, so that a fit can say where its time went. The zero
// value is ready; a nil *Phases times nothing.
type Phases struct {
	mu    sync.Mutex
	order []string
	took  map[string]time.Duration
	last  time.Time // of the last training round seen (Rounds)
}

// Add adds d to step name.
func (p *Phases) Add(name string, d time.Duration) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.took == nil {
		p.took = map[string]time.Duration{}
	}
	if _, ok := p.took[name]; !ok {
		p.order = append(p.order, name)
	}
	p.took[name] += d
}

// Since adds the time since start to step name and returns now, the
// start of the next step.
func (p *Phases) Since(name string, start time.Time) time.Time {
	now := time.Now()
	p.Add(name, now.Sub(start))
	return now
}

// Took returns the time of step name, and of all steps whose names
// start with name followed by a space ("train" sums "train latent" and
// "train outcome").
func (p *Phases) Took(name string) time.Duration {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var d time.Duration
	for n, t := range p.took {
		if n == name || strings.HasPrefix(n, name+" ") {
			d += t
		}
	}
	return d
}

// round is an estimator progress function: each training round's time,
// since the round before it (or since start, for the first), goes to
// "train MODEL".
func (p *Phases) round(start time.Time) func(estimator.Progress) {
	if p == nil {
		return func(estimator.Progress) {}
	}
	p.mu.Lock()
	p.last = start
	p.mu.Unlock()
	return func(pr estimator.Progress) {
		p.mu.Lock()
		now := time.Now()
		d := now.Sub(p.last)
		p.last = now
		p.mu.Unlock()
		p.Add("train "+pr.Model.String(), d)
	}
}

// WriteText writes one line: each step's time, in order.
func (p *Phases) WriteText(w io.Writer) error {
	if p == nil || len(p.order) == 0 {
		return nil
	}
	p.mu.Lock()
	parts := make([]string, len(p.order))
	for i, n := range p.order {
		parts[i] = fmt.Sprintf("%s %s", n, p.took[n].Round(100*time.Millisecond))
	}
	p.mu.Unlock()
	_, err := fmt.Fprintf(w, "time by step: %s\n", strings.Join(parts, ", "))
	return err
}
