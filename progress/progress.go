// Package progress shows the progress of long work: on a terminal, one
// line that is rewritten in place; otherwise structured DEBUG log lines at a
// bounded rate, so that a daemon's log is not flooded. At INFO, each task
// (a model trained, the rows scored) logs one line when it ends.
package progress

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"golang.org/x/term"
)

// Log keys of progress lines.
const (
	LogKeyTask    = "task"
	LogKeyDone    = "done"
	LogKeyTotal   = "total"
	LogKeyElapsed = "elapsed"
	LogKeyLeft    = "left"
	LogKeyDetail  = "detail"
)

// DefaultInterval is the least time between two log lines.
const DefaultInterval = 10 * time.Second

// redraw is the least time between two drawings of the bar on a terminal,
// besides a task's first and last update: scoring a million rows updates
// it 100 000 times.
const redraw = 100 * time.Millisecond

// Line reports the progress of one task.
type Line struct {
	w        io.Writer
	tty      bool
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time
	start    time.Time // when the current task began
	last     time.Time // the last log line
	prev     time.Time // the last Update
	drawn    time.Time // the bar's last drawing on a terminal; zero: none in this task
	task     string    // the current task; empty after Done
	done     int       // the current task's last update
	total    int
	detail   string
	shown    bool // a bar is on the terminal's line
}

// IsTerminal reports whether f is a terminal. A character device is not
// enough: /dev/null is one, and a bar rewritten there would hide the log
// lines a redirected run should write instead.
func IsTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// New returns a Line that rewrites a line on f when f is a terminal, and
// logs to log otherwise.
func New(f *os.File, log *slog.Logger) *Line {
	return newLine(f, IsTerminal(f), log, time.Now)
}

func newLine(w io.Writer, tty bool, log *slog.Logger, now func() time.Time) *Line {
	t := now()
	return &Line{w: w, tty: tty, log: log, interval: DefaultInterval, now: now, start: t}
}

// Update reports that done of total steps of task are finished; detail
// (such as "loss 1.234") is shown after the count. Elapsed and left are
// those of the task: it began at the Line's creation or its last Done, or,
// when it follows another task without a Done, at that task's last update.
//
// On a terminal the line is rewritten in place. Otherwise the first update
// of a task, and then one every interval, is logged at DEBUG. Either way a
// task ends (at the next task's first update, or at Done) with one INFO
// line saying what it finished and how long it took, so that the log at
// INFO holds one line per model trained, not one per interval.
func (l *Line) Update(task string, done, total int, detail string) {
	t := l.now()
	if task != l.task {
		if l.task != "" {
			l.finish(l.prev)
			l.start = l.prev
		}
		l.task, l.last, l.drawn = task, time.Time{}, time.Time{}
	}
	l.prev = t
	l.done, l.total, l.detail = done, total, detail
	elapsed := t.Sub(l.start)
	left := time.Duration(-1)
	if done > 0 && total >= done {
		left = time.Duration(float64(elapsed) / float64(done) * float64(total-done))
	}
	if l.tty {
		if !l.drawn.IsZero() && t.Sub(l.drawn) < redraw && done < total {
			return
		}
		l.drawn = t
		// \r returns to the line's start; \x1b[K clears what a longer
		// previous line left behind.
		fmt.Fprintf(l.w, "\r%s %d/%d %s  elapsed %s  left %s\x1b[K", task, done, total, detail, round(elapsed), leftString(left))
		l.shown = true
		return
	}
	if l.log == nil || (t.Sub(l.last) < l.interval && done < total) {
		return
	}
	l.last = t
	l.log.LogAttrs(context.Background(), slog.LevelDebug, "progress",
		slog.String(LogKeyTask, task), slog.String(LogKeyDetail, detail), slog.Int(LogKeyDone, done), slog.Int(LogKeyTotal, total),
		slog.Duration(LogKeyElapsed, round(elapsed)), slog.Duration(LogKeyLeft, round(left)))
}

// finish ends the current task at time end: on a terminal it clears the
// bar, and it logs the task's INFO line.
func (l *Line) finish(end time.Time) {
	if l.tty && l.shown {
		fmt.Fprint(l.w, "\r\x1b[K")
		l.shown = false
	}
	if l.log == nil {
		return
	}
	l.log.LogAttrs(context.Background(), slog.LevelInfo, "finished",
		slog.String(LogKeyTask, l.task), slog.String(LogKeyDetail, l.detail), slog.Int(LogKeyDone, l.done), slog.Int(LogKeyTotal, l.total),
		slog.Duration(LogKeyElapsed, round(end.Sub(l.start))))
}

// Done ends the current task, with its INFO line: the next one is timed
// from now.
func (l *Line) Done() {
	t := l.now()
	if l.task != "" {
		l.finish(t)
	}
	l.start, l.task = t, ""
}

func round(d time.Duration) time.Duration {
	if d < 0 {
		return d
	}
	return d.Round(100 * time.Millisecond)
}

func leftString(d time.Duration) string {
	if d < 0 {
		return "?"
	}
	return "~" + round(d).String()
}
