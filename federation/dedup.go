package federation

import (
	"crypto/hmac"
	"crypto/sha256"
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
	parts := make([]string, len(values))
	for i, v := range values {
		v = norm.NFKC.String(v)
		parts[i] = strings.Join(strings.FieldsFunc(strings.ToLower(v), unicode.IsSpace), " ")
	}
	return strings.Join(parts, "\x1f")
}

// IdentityHMAC returns HMAC-SHA256(secret, NormalizeIdentity(values)).
func IdentityHMAC(secret []byte, values []string) wire.Digest {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(NormalizeIdentity(values)))
	var d wire.Digest
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
