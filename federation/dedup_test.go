package federation

import (
	"testing"

	"github.com/crffd/crffd/federation/wire"
)

func TestIdentityHMAC(t *testing.T) {
	secret := []byte("shared by the sites")
	for _, tc := range []struct {
		name     string
		a, b     []string
		complete bool // of a and b alike
		same     bool // whether a and b must get one digest
	}{
		{"normalised alike", []string{" John  SMITH", "1970-01-01"}, []string{"john smith", "1970-01-01 "}, true, true},
		{"different people", []string{"john smith", "1970-01-01"}, []string{"john smith", "1970-01-02"}, true, false},
		{"columns kept apart", []string{"ab", "c"}, []string{"a", "bc"}, true, false},
		{"both lack a date of birth", []string{"john smith", ""}, []string{"john smith", ""}, false, false},
		{"white space only", []string{"john smith", " \t"}, []string{"john smith", " \t"}, false, false},
		{"no identity at all", []string{"", ""}, []string{"", ""}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IdentityComplete(tc.a); got != tc.complete {
				t.Errorf("IdentityComplete(%q) = %v, want %v", tc.a, got, tc.complete)
			}
			da, db := IdentityHMAC(secret, tc.a), IdentityHMAC(secret, tc.b)
			if (da == db) != tc.same {
				t.Errorf("digests equal: %v, want %v", da == db, tc.same)
			}
			if again := IdentityHMAC(secret, tc.a); (again == da) != tc.complete {
				t.Errorf("a second digest of %q equal to the first: %v, want %v", tc.a, again == da, tc.complete)
			}
		})
	}
}

// TestIncompleteIdentitiesAreNeverDropped: rows that lack an identity
// value, at one site or at two, must all be kept; a complete identity
// repeated across sites is still dropped once.
func TestIncompleteIdentitiesAreNeverDropped(t *testing.T) {
	secret := []byte("shared by the sites")
	lists := [][]wire.Digest{
		{IdentityHMAC(secret, []string{"ann", ""}), IdentityHMAC(secret, []string{"ann", ""}), IdentityHMAC(secret, []string{"bob", "1980"})},
		{IdentityHMAC(secret, []string{"ann", ""}), IdentityHMAC(secret, []string{"Bob ", "1980"})},
	}
	drop, repeats := dedupVerdict(lists)
	if repeats != 1 || len(drop[0]) != 0 || len(drop[1]) != 1 || drop[1][0] != 1 {
		t.Errorf("verdict %v (%d repeats), want only site 2's bob left out", drop, repeats)
	}
}
