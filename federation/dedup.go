package federation

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"slices"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/crffd/crffd/federation/wire"
)

// NormalizeIdentity returns the canonical form of one row's identity
// columns: each value Unicode-normalised (NFKC), trimmed, case-folded, with
// inner runs of white space collapsed to one space, joined by a unit
// separator (U+001F) so that ("ab", "c") and ("a", "bc") differ.
func NormalizeIdentity(values []string) string {
	return strings.Join(normalizedParts(values), identitySep)
}

// identitySep separates the normalised identity values.
const identitySep = "\x1f"

// normalizedParts returns each identity value in its canonical form.
func normalizedParts(values []string) []string {
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = strings.Join(strings.FieldsFunc(strings.ToLower(norm.NFKC.String(v)), unicode.IsSpace), " ")
	}
	return parts
}

// complete reports whether there are parts and none is empty.
func complete(parts []string) bool {
	return len(parts) > 0 && !slices.Contains(parts, "")
}

// IdentityComplete reports whether every one of a row's identity values
// is non-empty once normalised. NULL reads as empty.
func IdentityComplete(values []string) bool { return complete(normalizedParts(values)) }

// IdentityHMAC returns HMAC-SHA256(secret, NormalizeIdentity(values)) for a
// complete identity (IdentityComplete). For an incomplete one it returns a
// random digest instead, which matches no other row's: two rows that both
// lack a date of birth are not known to be one person, and equal digests
// would have the verdict drop all but one of them. A random digest also
// tells the coordinator nothing about which rows are incomplete.
func IdentityHMAC(secret []byte, values []string) wire.Digest {
	var d wire.Digest
	parts := normalizedParts(values)
	if !complete(parts) {
		_, _ = rand.Read(d[:]) // crypto/rand.Read never fails (Go 1.24+)
		return d
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(strings.Join(parts, identitySep)))
	m.Sum(d[:0])
	return d
}

// dedupVerdict finds repeated digests across sites and returns, per site,
// the positions of the rows to leave out: a digest seen at an earlier site
// (in the order given), or earlier at the same site, is dropped. nil lists
// (sites without identity columns) take no part.
func dedupVerdict(lists [][]wire.Digest) (drop [][]int, repeats int) {
	seen := map[wire.Digest]bool{}
	drop = make([][]int, len(lists))
	for s, l := range lists {
		for i, d := range l {
			if seen[d] {
				drop[s] = append(drop[s], i)
				repeats++
				continue
			}
			seen[d] = true
		}
	}
	return drop, repeats
}
