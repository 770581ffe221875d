//go:build linux

package mapped

import (
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Array returns n zero values of T in a shared mapping of an unnamed file
// made in dir, whose bytes are reserved on disk first.
func Array[T Value](dir string, n int) ([]T, error) {
	if n <= 0 {
		return nil, fmt.Errorf("mapped: %d values", n)
	}
	var zero T
	size := n * int(unsafe.Sizeof(zero))
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("%w: an unnamed file in %q: %w", ErrUnsupported, dir, err)
		}
		return nil, fmt.Errorf("mapped: an unnamed file in %q: %w", dir, err)
	}
	// The mapping keeps the file; closing the descriptor leaves nothing
	// to clean up should a later step fail.
	defer unix.Close(fd)
	if err := unix.Fallocate(fd, 0, 0, int64(size)); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			return nil, fmt.Errorf("%w: reserving %d bytes in %q: %w", ErrUnsupported, size, dir, err)
		}
		return nil, fmt.Errorf("mapped: reserving %d bytes in %q: %w", size, dir, err)
	}
	b, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapped: mapping %d bytes: %w", size, err)
	}
	keep(b)
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n), nil
}

// mappings are every mapping Array made, whose pages the evicter drops
// from the process every EvictEvery.
var mappings struct {
	sync.Mutex
	all     [][]byte
	started bool
}

// keep adds b to the mappings, starting the evicter with the first.
func keep(b []byte) {
	mappings.Lock()
	defer mappings.Unlock()
	mappings.all = append(mappings.all, b)
	if !mappings.started {
		mappings.started = true
		// As long-lived as the mappings it serves, which are never
		// released: the process's end stops both.
		go func() {
			for range time.Tick(EvictEvery) {
				_ = Evict()
			}
		}()
	}
}

// Evict drops every mapping's pages from the process's resident set now
// (madvise MADV_DONTNEED). The mappings are shared, so their pages, dirty
// or not, stay in the page cache, and a later read of one maps it back
// without reading the disk.
func Evict() error {
	mappings.Lock()
	defer mappings.Unlock()
	return evictLocked()
}

// evictLocked is Evict with mappings locked.
func evictLocked() error {
	for _, b := range mappings.all {
		if err := unix.Madvise(b, unix.MADV_DONTNEED); err != nil {
			return fmt.Errorf("mapped: dropping %d bytes from the resident set: %w", len(b), err)
		}
	}
	return nil
}

// Made returns how many mappings the process has made, and their bytes:
// what a one-shot fit put beside its site file.
func Made() (arrays int, bytes int64) {
	mappings.Lock()
	defer mappings.Unlock()
	for _, b := range mappings.all {
		bytes += int64(len(b))
	}
	return len(mappings.all), bytes
}
