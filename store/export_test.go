package store

import "testing"

// SetCATEChunk makes transactions write or delete at most n CATEs (the
// default is about 10 000) until t ends, so that a test of a few rows
// sees them written in many transactions.
func SetCATEChunk(t testing.TB, n int) {
	old := cateChunk
	cateChunk = n
	t.Cleanup(func() { cateChunk = old })
}
