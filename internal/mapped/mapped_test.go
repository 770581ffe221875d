package mapped

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestFloat64s: the array holds what is written to it, the folder is left
// as empty as it was (the file never had a name), and a folder that is
// not there is refused.
func TestFloat64s(t *testing.T) {
	dir := t.TempDir()
	const n = 1 << 20
	a, err := Float64s(dir, n)
	if errors.Is(err, ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != n || cap(a) != n {
		t.Fatalf("len %d, cap %d; want %d", len(a), cap(a), n)
	}
	for i := range a {
		if a[i] != 0 {
			t.Fatalf("value %d is %v before any write", i, a[i])
		}
		a[i] = float64(i) * 0.5
	}
	for i := range a {
		if a[i] != float64(i)*0.5 {
			t.Fatalf("value %d reads %v", i, a[i])
		}
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Errorf("folder holds %v (%v); want nothing", ents, err)
	}
	if _, err := Float64s(filepath.Join(dir, "missing"), 8); err == nil {
		t.Error("a missing folder was accepted")
	}
	if _, err := Float64s(dir, 0); err == nil {
		t.Error("an empty array was made")
	}
}

// TestEvict: pages written count in the resident set until Evict drops
// them, and read back as written afterwards (the page cache kept them).
func TestEvict(t *testing.T) {
	const n = 64 << 20 / 8 // 64 MiB
	a, err := Float64s(t.TempDir(), n)
	if errors.Is(err, ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	// The evicter waits while the mappings are locked: the pages written
	// stay resident until evictLocked drops them.
	before := func() int64 {
		mappings.Lock()
		defer mappings.Unlock() // residentKiB may end the test
		for i := range a {
			a[i] = float64(i)
		}
		before := residentKiB(t)
		if err := evictLocked(); err != nil {
			t.Fatal(err)
		}
		return before
	}()
	after := residentKiB(t)
	if before-after < 48<<10 {
		t.Fatalf("resident set %d KiB before Evict, %d after: want at least 48 MiB fewer", before, after)
	}
	for i := range a {
		if a[i] != float64(i) {
			t.Fatalf("value %d reads %v after Evict", i, a[i])
		}
	}
}

// residentKiB is the process's resident set, from /proc.
func residentKiB(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc here:", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS line %q: %v", line, err)
			}
			return kb
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// TestLarge: arrays from the minimum Use gives go to a mapping in its
// folder, smaller ones, and all once the setting is restored, to the heap;
// all are zeroed.
func TestLarge(t *testing.T) {
	if _, err := Float64s(t.TempDir(), 8); errors.Is(err, ErrUnsupported) {
		t.Skip(err)
	}
	before, _ := Made()
	for _, c := range []struct {
		dir    string
		min, n int
		mapped bool
	}{
		{"", LargeMin, LargeMin, false},
		{t.TempDir(), LargeMin, LargeMin - 1, false},
		{t.TempDir(), LargeMin, LargeMin, true},
		{t.TempDir(), 10, 10, true},
		{t.TempDir(), 0, 1, true}, // a minimum below 1 is 1
		{t.TempDir(), 10, 0, false},
		{filepath.Join(t.TempDir(), "missing"), LargeMin, LargeMin, false}, // a failed mapping: the heap
	} {
		restore := Use(c.dir, c.min)
		a := Large(c.n)
		restore()
		if len(a) != c.n || c.n > 0 && (a[0] != 0 || a[c.n-1] != 0) {
			t.Fatalf("Large(%d) in %q from %d: %d values", c.n, c.dir, c.min, len(a))
		}
		now, _ := Made()
		if got := now > before; got != c.mapped {
			t.Errorf("Large(%d) in %q from %d: mapped %v, want %v", c.n, c.dir, c.min, got, c.mapped)
		}
		before = now
	}
	// Restored: nothing is mapped any more.
	if a := LargeArray[[32]byte](LargeMin); len(a) != LargeMin {
		t.Errorf("after restore: %d values, want %d", len(a), LargeMin)
	}
	if now, _ := Made(); now != before {
		t.Errorf("after restore: %d mappings, want %d", now, before)
	}
	// Nested settings restore in turn.
	dir := t.TempDir()
	outer := Use(dir, 4)
	inner := Use("", 0)
	if Large(8); count() != before {
		t.Error("the inner setting (the heap) mapped")
	}
	inner()
	if Large(8); count() != before+1 {
		t.Error("the outer setting, restored, did not map")
	}
	if _, b := Made(); b < 8*8+LargeMin*8 {
		t.Errorf("%d bytes mapped, want at least those of this test", b)
	}
	outer()
}

// count is the number of mappings made.
func count() int {
	n, _ := Made()
	return n
}
