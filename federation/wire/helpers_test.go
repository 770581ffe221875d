package wire_test

import (
	"crypto/sha256"
	"testing"

	"github.com/crffd/crffd/federation/wire"
)

// header returns a valid header of kind k.
func header(k wire.Kind) wire.Header {
	return wire.Header{RunID: "run-1", Model: "outcome", Round: 7, Kind: k, Sender: "coordinator", Recipient: "site-a"}
}

// sampleTensors returns a small payload with a matrix, a vector and a scalar.
func sampleTensors() []wire.Tensor {
	return []wire.Tensor{
		{Name: "W/beta0", Shape: []int{2, 3}, Values: []float64{1, -2, 3.5, 0, -0.25, 1e-300}},
		{Name: "shared/a", Shape: []int{1}, Values: []float64{0.5}},
		{Name: "loss", Values: []float64{42}},
	}
}

// hmacs returns n distinct digests.
func hmacs(n int) []wire.Digest {
	out := make([]wire.Digest, n)
	for i := range out {
		out[i] = sha256.Sum256([]byte{byte(i), byte(i >> 8)})
	}
	return out
}

// mustNew builds an envelope or fails the test.
func mustNew(t testing.TB, h wire.Header, ts []wire.Tensor, ls ...wire.DigestList) *wire.Envelope {
	t.Helper()
	e, err := wire.New(h, ts, ls...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// mustMarshal encodes an envelope or fails the test.
func mustMarshal(t testing.TB, e *wire.Envelope) []byte {
	t.Helper()
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
