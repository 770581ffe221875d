//go:build !linux

package mapped

// Array fails with ErrUnsupported: unnamed temporary files are Linux's.
func Array[T Value](dir string, n int) ([]T, error) { return nil, ErrUnsupported }

// Evict has no mappings to drop.
func Evict() error { return nil }

func evictLocked() error { return nil }

// Made returns 0, 0: nothing is mapped here.
func Made() (arrays int, bytes int64) { return 0, 0 }
