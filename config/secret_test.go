package config

import (
	"strings"
	"testing"
)

func TestCheckSecret(t *testing.T) {
	for _, tc := range []struct {
		secret string
		ok     bool
	}{
		{"0123456789abcdef0123456789abcdef", true},      // 32 hex digits: 165 bits by the estimate
		{"q1Zx9+Lm/3Rt0PaWe8Yk2b", true},                // 22 base64 characters
		{"shared by the sites only", true},              // 24 characters, letters and spaces: 141 bits
		{"hunter2", false},                              // 7 characters
		{"0123456789abcdef", false},                     // 16 hex digits: 82 bits
		{strings.Repeat("ab", 40), false},               // long, 2 distinct characters
		{strings.Repeat("0123456789", 3), false},        // 30 digits: 100 bits
		{"correcthorsebatterystaplecorrecthorse", true}, // words pass: the estimate cannot tell
		{"ÄÖÜäöüßéèêëàâîïôûç€", false},                  // 19 characters
		{"", false},
	} {
		err := CheckSecret(tc.secret)
		if (err == nil) != tc.ok {
			t.Errorf("CheckSecret(%q) = %v, want ok %v", tc.secret, err, tc.ok)
		}
		if err != nil && tc.secret != "" && strings.Contains(err.Error(), tc.secret) {
			t.Errorf("the error quotes the secret: %v", err)
		}
	}
}
