package kit_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/crffd/crffd/kit"
)

// FuzzVerifyReader: an archive of any bytes is refused with ErrKit or
// verified, never a panic or a hang; a kit verified names a folder.
func FuzzVerifyReader(f *testing.F) {
	ca := newCAF(f)
	out := filepath.Join(f.TempDir(), "a.tar.gz")
	if err := kit.WriteSite(ca, out, kit.Site{Name: "a", Coordinator: "h:1"}); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(out)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte("\x1f\x8b\x08\x00"))
	f.Add(good[:len(good)/2])
	now := time.Now()
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := kit.VerifyReader(bytes.NewReader(b), now)
		if err == nil && rep.Name == "" {
			t.Fatal("a kit verified without a name")
		}
		if err != nil && !errors.Is(err, kit.ErrKit) && rep != nil {
			t.Fatalf("err %v with a report", err)
		}
	})
}
