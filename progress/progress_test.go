package progress

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
)

// clock is a fake time source advanced by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// noTime drops the time attribute of log lines.
func noTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

func TestTerminalLine(t *testing.T) {
	var out, log bytes.Buffer
	c := &clock{t: time.Unix(0, 0)}
	l := newLine(&out, true, slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{ReplaceAttr: noTime})), c.now)
	c.t = c.t.Add(2 * time.Second)
	l.Update("training latent", 10, 40, "loss 1.5")
	c.t = c.t.Add(time.Second)
	l.Done()
	// The bar, then cleared for the task's INFO line.
	want := "\rtraining latent 10/40 loss 1.5  elapsed 2s  left ~6s\x1b[K\r\x1b[K"
	if got := out.String(); got != want {
		t.Errorf("terminal output %q, want %q", got, want)
	}
	if got, want := log.String(), `level=INFO msg=finished task="training latent" detail="loss 1.5" done=10 total=40 elapsed=3s`+"\n"; got != want {
		t.Errorf("log %q, want %q", got, want)
	}
}

// TestOneInfoLinePerTask: updates are logged at DEBUG at a bounded rate,
// and each task at INFO once, when it ends.
func TestOneInfoLinePerTask(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := &clock{t: time.Unix(0, 0)}
	l := newLine(nil, false, log, c.now)
	for _, task := range []string{"training propensity", "training outcome", "training latent"} {
		for i := 1; i <= 100; i++ {
			c.t = c.t.Add(time.Second)
			l.Update(task, i, 100, "loss 1")
		}
	}
	l.Done()
	debug, info := strings.Count(buf.String(), "level=DEBUG"), strings.Count(buf.String(), "level=INFO")
	// One at the first update, one every 10 s, one at the end, per task.
	if debug < 30 || debug > 36 {
		t.Errorf("%d debug lines for 3 × 100 updates over 300 s, want about 33:\n%s", debug, buf.String())
	}
	if info != 3 {
		t.Errorf("%d info lines for 3 tasks, want 3:\n%s", info, buf.String())
	}
	for _, task := range []string{"propensity", "outcome", "latent"} {
		if !strings.Contains(buf.String(), `level=INFO msg=finished task="training `+task+`" detail="loss 1" done=100 total=100`) {
			t.Errorf("no INFO line for training %s", task)
		}
	}
}

// TestTasksAreTimedAlone: elapsed and left are those of the current task,
// not of the Line, so that a task after a long one does not inherit its
// time: after Done the next task starts at Done, and a task that follows
// another without Done starts at that task's last update.
func TestTasksAreTimedAlone(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: noTime}))
	c := &clock{t: time.Unix(0, 0)}
	l := newLine(nil, false, log, c.now)
	c.t = c.t.Add(100 * time.Second) // a long first task
	l.Update("training propensity", 10, 10, "")
	c.t = c.t.Add(20 * time.Second)
	l.Update("training outcome", 5, 10, "") // began at the last update, 20 s ago
	c.t = c.t.Add(5 * time.Second)
	l.Done()
	c.t = c.t.Add(60 * time.Second) // work without progress
	l.Done()
	c.t = c.t.Add(4 * time.Second)
	l.Update("scoring", 40, 1000, "rows") // began at the last Done, 4 s ago
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		"elapsed=1m40s left=0s",
		"finished task=\"training propensity\" detail=\"\" done=10 total=10 elapsed=1m40s",
		"elapsed=20s left=20s",
		"finished task=\"training outcome\" detail=\"\" done=5 total=10 elapsed=25s",
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

// TestDevNullIsNoTerminal: /dev/null is a character device, not a
// terminal, so a run redirected there logs instead of drawing a bar.
func TestDevNullIsNoTerminal(t *testing.T) {
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || info.Mode()&os.ModeCharDevice == 0 {
		t.Skipf("%s is not a character device here", os.DevNull)
	}
	if IsTerminal(f) {
		t.Errorf("%s taken for a terminal", os.DevNull)
	}
}

// TestTerminalRedrawsAtABoundedRate: on a terminal, updates closer than
// redraw to the last drawing are not drawn, except a task's first and its
// last (done = total).
func TestTerminalRedrawsAtABoundedRate(t *testing.T) {
	var out bytes.Buffer
	c := &clock{t: time.Unix(0, 0)}
	l := newLine(&out, true, nil, c.now)
	for i := 1; i <= 1000; i++ {
		c.t = c.t.Add(time.Millisecond) // 1 s in all: about ten drawings
		l.Update("scoring", i, 1000, "rows")
	}
	draws := strings.Count(out.String(), "\r")
	if draws < 10 || draws > 12 {
		t.Errorf("%d drawings of 1000 updates over 1 s, want 10 to 12", draws)
	}
	if !strings.Contains(out.String(), "scoring 1/1000 ") || !strings.HasSuffix(out.String(), "\x1b[K") || !strings.Contains(out.String(), "scoring 1000/1000 ") {
		t.Errorf("the first or the last update was not drawn: %q", out.String())
	}
}
