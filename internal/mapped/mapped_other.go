//go:build !linux

package mapped

// Float64s fails with ErrUnsupported: unnamed temporary files are
// Linux's.
func Float64s(dir string, n int) ([]float64, error) { return nil, ErrUnsupported }

// Evict has no mappings to drop.
func Evict() error { return nil }
