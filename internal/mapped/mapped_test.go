package mapped

import (
	"errors"
	"os"
	"path/filepath"
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
