package wire

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"math"
)

// digestDomain starts the canonical payload encoding, so that its hash
// cannot be mistaken for the hash of anything else.
const digestDomain = "crffd/wire/v1 payload\n"

// PayloadDigest returns the SHA-256 of the canonical encoding of a payload
// (see the package documentation). It is deterministic: the same tensors
// and lists in the same order give the same digest on every platform.
func PayloadDigest(tensors []Tensor, lists []DigestList) Digest {
	w := canonicalWriter{h: sha256.New()}
	w.h.Write([]byte(digestDomain))
	w.u32(uint32(len(tensors)))
	for _, t := range tensors {
		w.str(t.Name)
		w.u32(uint32(len(t.Shape)))
		for _, d := range t.Shape {
			w.u64(uint64(d))
		}
		w.u64(uint64(len(t.Values)))
		for _, v := range t.Values {
			w.u64(math.Float64bits(v))
		}
	}
	w.u32(uint32(len(lists)))
	for _, l := range lists {
		w.str(l.Name)
		w.u64(uint64(len(l.Digests)))
		for i := range l.Digests {
			w.buf = append(w.buf, l.Digests[i][:]...)
			w.flushIfFull()
		}
	}
	w.flush()
	var d Digest
	w.h.Sum(d[:0])
	return d
}

// canonicalWriter buffers the encoding in blocks on its way into the hash.
type canonicalWriter struct {
	h   hash.Hash
	buf []byte
}

const canonicalBlock = 32 << 10

func (w *canonicalWriter) u32(v uint32) {
	w.buf = binary.BigEndian.AppendUint32(w.buf, v)
	w.flushIfFull()
}

func (w *canonicalWriter) u64(v uint64) {
	w.buf = binary.BigEndian.AppendUint64(w.buf, v)
	w.flushIfFull()
}

func (w *canonicalWriter) str(s string) {
	w.u32(uint32(len(s)))
	w.buf = append(w.buf, s...)
	w.flushIfFull()
}

func (w *canonicalWriter) flushIfFull() {
	if len(w.buf) >= canonicalBlock {
		w.flush()
	}
}

func (w *canonicalWriter) flush() {
	w.h.Write(w.buf)
	w.buf = w.buf[:0]
}
