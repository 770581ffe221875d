package demo

import (
	"bytes"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

func TestPeakRSSOfAChild(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("peak resident sets are read on Linux only")
	}
	cmd := exec.Command("sh", "-c", "true")
	if err := cmd.Run(); err != nil {
		t.Skip("no sh here:", err)
	}
	b, ok := peakRSS(cmd.ProcessState)
	// Any process maps more than a page; ru_maxrss in bytes, not KiB, is
	// above 64 KiB for sh.
	if !ok || b < 64<<10 || b > 1<<30 {
		t.Fatalf("peakRSS = %d, %v; want the bytes of a small process", b, ok)
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
