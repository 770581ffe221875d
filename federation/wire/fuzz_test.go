package wire_test

import (
	"bytes"
	"testing"

	"github.com/crffd/crffd/federation/wire"
)

// FuzzDecode feeds arbitrary bytes to Unmarshal. It must never panic, and
// whatever it accepts must be valid and re-encode to an envelope that
// decodes to the same header and digest. The seed corpus is in
// testdata/fuzz/FuzzDecode; run with: go test -fuzz FuzzDecode ./federation/wire
func FuzzDecode(f *testing.F) {
	for _, k := range wire.Kinds() {
		var lists []wire.DigestList
		if k == wire.KindDedupHashes {
			lists = []wire.DigestList{{Name: "hmac", Digests: hmacs(2)}}
		}
		f.Add(mustMarshal(f, mustNew(f, header(k), sampleTensors(), lists...)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := wire.Unmarshal(b)
		if err != nil {
			if e != nil {
				t.Fatal("Unmarshal returned an envelope with an error")
			}
			return
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("accepted an invalid envelope: %v", err)
		}
		again, err := e.Marshal()
		if err != nil {
			t.Fatalf("cannot re-encode an accepted envelope: %v", err)
		}
		e2, err := wire.Unmarshal(again)
		if err != nil {
			t.Fatalf("cannot decode a re-encoded envelope: %v", err)
		}
		if e2.Header != e.Header || e2.PayloadDigest() != e.PayloadDigest() {
			t.Fatalf("round trip changed %v into %v", e, e2)
		}
		if again2, _ := e2.Marshal(); !bytes.Equal(again, again2) {
			t.Fatal("encoding is not stable")
		}
	})
}
