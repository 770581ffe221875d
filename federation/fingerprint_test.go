package federation

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// A coordinator that hashes likely column names finds them in the hello
// when the fingerprints are unkeyed, and not when the sites key them with
// their secret.
func TestColumnFingerprintsAreKeyed(t *testing.T) {
	dictionary := func() [][]byte {
		var out [][]byte
		for j, name := range testColumns {
			d := sha256.Sum256(fmt.Appendf(nil, "crffd/column\x00%s\x00binary=%t", name, testSchema.Binary[j]))
			out = append(out, d[:])
		}
		return out
	}()
	for _, tc := range []struct {
		name  string
		key   []byte
		found bool
	}{
		{"unkeyed", nil, true},
		{"keyed", []byte("0123456789abcdef0123456789abcdef"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			f := newFed(30, 30)
			for s := range f.cfgs {
				f.cfgs[s].ColumnKey = tc.key
			}
			var mu sync.Mutex
			found := 0
			f.net.Intercept = func(b []byte) [][]byte {
				mu.Lock()
				defer mu.Unlock()
				for _, d := range dictionary {
					if bytes.Contains(b, d) {
						found++
					}
				}
				return [][]byte{b}
			}
			sites := f.start(ctx)
			if _, err := RunCoordinator(ctx, f.coordinator(testConfig()), f.net.Endpoint("coord")); err != nil {
				t.Fatal(err)
			}
			waitSites(t, sites)
			if (found > 0) != tc.found {
				t.Errorf("dictionary digests found on the wire %d times, want found=%t", found, tc.found)
			}
		})
	}
}

// Sites whose secrets differ do not agree on any column, and the site's
// error says that the secret may be why.
func TestColumnKeysMustAgree(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := newFed(30, 30)
	f.cfgs[0].ColumnKey = []byte("0123456789abcdef0123456789abcdef")
	f.cfgs[1].ColumnKey = []byte("fedcba9876543210fedcba9876543210")
	sites := f.start(ctx)
	_, err := RunCoordinator(ctx, f.coordinator(testConfig()), f.net.Endpoint("coord"))
	if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "covariate 0") {
		t.Fatalf("coordinator: %v", err)
	}
	if r := <-sites[1]; !errors.Is(r.err, ErrSchema) || !strings.Contains(r.err.Error(), "secrets differ") {
		t.Fatalf("site2: %v", r.err)
	}
	<-sites[0]
}
