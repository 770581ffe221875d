package pipeline

import (
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/estimator"
)

// TestPhases: steps add up by name in the order first timed, training
// rounds go to their model, Took sums a step's parts, and a nil *Phases
// times nothing.
func TestPhases(t *testing.T) {
	p := &Phases{}
	p.Add("read", 2*time.Second)
	start := time.Now().Add(-3 * time.Second)
	round := p.round(start)
	round(estimator.Progress{Model: estimator.Latent})
	round(estimator.Progress{Model: estimator.Latent})
	round(estimator.Progress{Model: estimator.Outcome})
	p.Add("read", time.Second)
	if got := p.Took("read"); got != 3*time.Second {
		t.Errorf("read: %v, want 3s", got)
	}
	lat, out := p.Took("train latent"), p.Took("train outcome")
	if lat < 3*time.Second || out <= 0 || p.Took("train") != lat+out {
		t.Errorf("train latent %v (want ≥ 3s, the first round since start), outcome %v, train %v", lat, out, p.Took("train"))
	}
	var b strings.Builder
	if err := p.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.HasPrefix(got, "time by step: read 3s, train latent 3") || !strings.Contains(got, ", train outcome ") {
		t.Errorf("WriteText: %q", got)
	}
	var none *Phases
	none.Add("read", time.Second)
	none.round(start)(estimator.Progress{})
	if none.Took("read") != 0 || none.WriteText(&b) != nil {
		t.Error("a nil *Phases timed something")
	}
}
