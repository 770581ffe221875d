package wire

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/crffd/crffd/ident"
)

// Limits on the names an envelope carries.
const (
	// MaxNameBytes bounds a federation name (sender, recipient, model):
	// ident.MaxNameBytes.
	MaxNameBytes = ident.MaxNameBytes
	// MaxRunIDBytes bounds a run id: ident.MaxRunIDBytes.
	MaxRunIDBytes = ident.MaxRunIDBytes
	// MaxTensorNameBytes bounds a tensor or digest-list name.
	MaxTensorNameBytes = 256
)

// CheckName reports whether name is a valid federation name: the name of a
// site or a coordinator, as it appears in envelopes, certificates (their
// Subject CommonName) and spool directories. It is ident.CheckName, which
// the certificate code applies too; the rule lives there. The error wraps
// ErrName.
func CheckName(name string) error { return ident.CheckName(name) }

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
