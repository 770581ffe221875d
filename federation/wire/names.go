package wire

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Limits on the names an envelope carries.
const (
	// MaxNameBytes bounds a federation name (sender, recipient, model).
	MaxNameBytes = 64
	// MaxRunIDBytes bounds a run id.
	MaxRunIDBytes = 128
	// MaxTensorNameBytes bounds a tensor or digest-list name.
	MaxTensorNameBytes = 256
)

// CheckName reports whether name is a valid federation name: the name of a
// site or a coordinator, as it appears in envelopes, certificates (their
// Subject CommonName) and spool directories. A name has 1 to MaxNameBytes
// characters from a–z, 0–9, '.', '_' and '-', and starts with a letter or a
// digit, so it is also a safe file name. The error wraps ErrName.
func CheckName(name string) error {
	if err := checkToken(name, MaxNameBytes, false); err != nil {
		return fmt.Errorf("federation name %q: %w", name, err)
	}
	return nil
}

// checkRunID checks a run id: like a name, but up to MaxRunIDBytes and
// upper-case letters and ':' are allowed too (timestamps, UUIDs).
func checkRunID(id string) error {
	if err := checkToken(id, MaxRunIDBytes, true); err != nil {
		return fmt.Errorf("run id %q: %w", id, err)
	}
	return nil
}

func checkToken(s string, max int, wide bool) error {
	if s == "" {
		return fmt.Errorf("empty: %w", ErrName)
	}
	if len(s) > max {
		return fmt.Errorf("longer than %d bytes: %w", max, ErrName)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		case wide && (c >= 'A' && c <= 'Z'):
		case wide && i > 0 && c == ':':
		default:
			return fmt.Errorf("character %d (%q) is not allowed: %w", i, rune(c), ErrName)
		}
	}
	return nil
}

// checkTensorName checks a tensor or digest-list name: 1 to
// MaxTensorNameBytes bytes of valid UTF-8 without control characters, so
// that covariate names can name tensors in hello.
func checkTensorName(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty tensor name: %w", ErrName)
	case len(s) > MaxTensorNameBytes:
		return fmt.Errorf("tensor name longer than %d bytes: %w", MaxTensorNameBytes, ErrName)
	case !utf8.ValidString(s):
		return fmt.Errorf("tensor name %q is not UTF-8: %w", s, ErrName)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("tensor name %q has a control character: %w", s, ErrName)
		}
	}
	return nil
}
