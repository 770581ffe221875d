package progress

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// clock is a fake time source advanced by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestTerminalLine(t *testing.T) {
	var out bytes.Buffer
	c := &clock{t: time.Unix(0, 0)}
	l := newLine(&out, true, nil, c.now)
	c.t = c.t.Add(2 * time.Second)
	l.Update("training latent", 10, 40, "loss 1.5")
	l.Done()
	got := out.String()
	want := "\rtraining latent 10/40 loss 1.5  elapsed 2s  left ~6s\x1b[K\n"
	if got != want {
		t.Errorf("terminal output %q, want %q", got, want)
	}
}

func TestLogLinesAreRateLimited(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	c := &clock{t: time.Unix(0, 0)}
	l := newLine(nil, false, log, c.now)
	for i := 1; i <= 100; i++ {
		c.t = c.t.Add(time.Second)
		l.Update("eval", i, 100, "run")
	}
	lines := strings.Count(buf.String(), "\n")
	// One at the first update, one every 10 s, one at the end.
	if lines < 10 || lines > 12 {
		t.Errorf("%d log lines for 100 updates over 100 s, want about 11:\n%s", lines, buf.String())
	}
	if !strings.Contains(buf.String(), "done=100 total=100") {
		t.Error("the final update was not logged")
	}
}
