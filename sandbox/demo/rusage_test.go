package demo

import (
	"bytes"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestPeakRSSOfAChild(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("peak resident sets are read on Linux only")
	}
	// A child that holds 64 MiB resident, started by a process that
	// holds more: its own peak is read, not its parent's.
	hold := make([]byte, 256<<20)
	for i := range hold {
		hold[i] = 1
	}
	cmd := exec.Command("sh", "-c", "x=$(head -c 67108864 /dev/zero | tr '\\0' a); sleep 2")
	if err := cmd.Start(); err != nil {
		t.Skip("no sh here:", err)
	}
	ended := make(chan struct{})
	go func() { cmd.Wait(); close(ended) }()
	var b int64
	for b < 64<<20 {
		select {
		case <-ended:
			t.Fatalf("the child ended with a peak of %d bytes read", b)
		case <-time.After(20 * time.Millisecond):
		}
		if got, ok := peakRSS(cmd.Process.Pid); ok {
			b = got
		}
	}
	<-ended
	if b < 64<<20 || b > 200<<20 {
		t.Fatalf("peakRSS = %d bytes; want the child's 64 MiB and a little, not the parent's %d", b, len(hold))
	}
	hold[0] = 0
	if _, ok := peakRSS(-1); ok {
		t.Error("a process that is not there has a peak")
	}
}

func TestPeaksPrint(t *testing.T) {
	var p peaks
	var w bytes.Buffer
	p.print(&w, []string{"coordinator", "site1"})
	if w.Len() != 0 {
		t.Fatalf("no peaks known printed %q", w.String())
	}
	p.set("site1", 3<<29)
	p.set("coordinator", 1<<26)
	p.print(&w, []string{"coordinator", "site1", "site2"})
	want := "coordinator 0.06 GiB, site1 1.50 GiB\n"
	if !strings.HasSuffix(w.String(), want) {
		t.Fatalf("printed %q, want it to end %q", w.String(), want)
	}
}
