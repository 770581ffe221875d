package transport_test

import (
	"bytes"
	"testing"

	"github.com/crffd/crffd/plugins/transport"
)

// FuzzReadCapture checks that ReadCapture never panics and never returns
// more bytes than its input holds.
func FuzzReadCapture(f *testing.F) {
	f.Add([]byte(">\x03abc<\x00"))
	f.Add([]byte("<\xff\xff\xff\xff\x0f"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, _ := transport.ReadCapture(bytes.NewReader(b))
		n := 0
		for _, r := range recs {
			if r.Direction != transport.Sent && r.Direction != transport.Received {
				t.Fatalf("direction %q", r.Direction)
			}
			n += 2 + len(r.Envelope) // at least a direction byte and a length byte
		}
		if n > len(b) {
			t.Fatalf("%d records with %d bytes read from %d bytes", len(recs), n, len(b))
		}
	})
}
