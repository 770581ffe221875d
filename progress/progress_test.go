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

// TestTasksAreTimedAlone: elapsed and left are those of the current task,
// not of the Line, so that a task after a long one does not inherit its
// time: after Done the next task starts at Done, and a task that follows
// another without Done starts at that task's last update.
func TestTasksAreTimedAlone(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	c := &clock{t: time.Unix(0, 0)}
	l := newLine(nil, false, log, c.now)
	c.t = c.t.Add(100 * time.Second) // a long first task
	l.Update("training propensity", 10, 10, "")
	c.t = c.t.Add(20 * time.Second)
	l.Update("training outcome", 5, 10, "") // began at the last update, 20 s ago
	l.Done()
	c.t = c.t.Add(60 * time.Second) // work without progress
	l.Done()
	c.t = c.t.Add(4 * time.Second)
	l.Update("scoring", 40, 1000, "rows") // began at the last Done, 4 s ago
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		"elapsed=1m40s left=0s",
		"elapsed=20s left=20s",
		"elapsed=4s left=1m36s",
	}
	if len(lines) != len(want) {
		t.Fatalf("%d log lines, want %d (the first update of each task is logged at once):\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if !strings.HasSuffix(lines[i], w) {
			t.Errorf("line %d: %q, want it to end %q", i+1, lines[i], w)
		}
	}
}
