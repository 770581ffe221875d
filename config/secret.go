package config

import (
	"fmt"
	"math"
	"unicode"
)

// minSecretBits is the least estimated strength of federation.secret: the
// identity HMAC is only as private as its key, and a coordinator that
// could guess the key could test candidate identities against the hashes.
const minSecretBits = 128

// minSecretDistinct is the fewest distinct characters a secret may have,
// which refuses repetitions such as "abababab…" that the length alone
// would pass.
const minSecretDistinct = 10

// secretBits estimates the strength of a secret in bits as its length
// times log2 of the alphabet its characters are drawn from (26 lower-case
// letters, 26 upper-case, 10 digits and 33 others, counted for the classes
// it uses). It is an upper bound for random strings and too generous for
// words, so it refuses short and repetitive secrets, not every weak one.
func secretBits(s string) float64 {
	var lower, upper, digit, other bool
	n := 0
	for _, r := range s {
		n++
		switch {
		case unicode.IsLower(r):
			lower = true
		case unicode.IsUpper(r):
			upper = true
		case unicode.IsDigit(r):
			digit = true
		default:
			other = true
		}
	}
	pool := 0
	for _, c := range []struct {
		used bool
		size int
	}{{lower, 26}, {upper, 26}, {digit, 10}, {other, 33}} {
		if c.used {
			pool += c.size
		}
	}
	if pool == 0 {
		return 0
	}
	return float64(n) * math.Log2(float64(pool))
}

// CheckSecret refuses a federation.secret estimated weaker than
// minSecretBits or with fewer than minSecretDistinct distinct characters.
// The error gives the estimate, never the secret.
func CheckSecret(s string) error {
	distinct := map[rune]bool{}
	for _, r := range s {
		distinct[r] = true
	}
	if bits := secretBits(s); bits < minSecretBits || len(distinct) < minSecretDistinct {
		return fmt.Errorf("federation.secret is too weak (about %.0f bits from %d characters, %d distinct): want at least %d bits and %d distinct characters, such as 32 random hex digits (openssl rand -hex 32)",
			math.Floor(bits), len([]rune(s)), len(distinct), minSecretBits, minSecretDistinct)
	}
	return nil
}
