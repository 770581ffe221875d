// Package ident checks the identifiers crffd's daemons exchange: federation
// names, which name a site or a coordinator in envelopes, in certificates
// (their Subject CommonName) and in spool directories; the model names and
// the run ids envelopes carry.
//
// It is a leaf, so that the certificate code and the wire protocol apply
// one rule without either importing the other. Every check returns an
// error that wraps ErrName and says which identifier failed and why.
package ident

import (
	"errors"
	"fmt"
)

// Limits on the length of identifiers.
const (
	// MaxNameBytes bounds a federation name (sender, recipient) and a
	// model name.
	MaxNameBytes = 64
	// MaxRunIDBytes bounds a run id.
	MaxRunIDBytes = 128
)

// ErrName reports an invalid identifier.
var ErrName = errors.New("invalid name")

// CheckName reports whether name is a valid federation name: the name of a
// site or a coordinator, as it appears in envelopes, certificates and
// spool directories. A name has 1 to MaxNameBytes characters from a–z,
// 0–9, '.', '_' and '-', and starts with a letter or a digit, so it is
// also a safe file name. The error wraps ErrName.
func CheckName(name string) error {
	if err := checkToken(name, MaxNameBytes, false); err != nil {
		return fmt.Errorf("federation name %q: %w", name, err)
	}
	return nil
}

// CheckModel reports whether model is a valid model name, by the rule of
// CheckName. The error wraps ErrName.
func CheckModel(model string) error {
	if err := checkToken(model, MaxNameBytes, false); err != nil {
		return fmt.Errorf("model %q: %w", model, err)
	}
	return nil
}

// CheckRunID reports whether id is a valid run id: like a name, but up to
// MaxRunIDBytes, and upper-case letters and ':' are allowed too, for
// timestamps and UUIDs. The error wraps ErrName.
func CheckRunID(id string) error {
	if err := checkToken(id, MaxRunIDBytes, true); err != nil {
		return fmt.Errorf("run id %q: %w", id, err)
	}
	return nil
}

// checkToken checks s against the rule of names, widened to upper case
// and ':' when wide.
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
