package config

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/crffd/crffd/store"
)

// ParseDelimiter reads --delimiter: "" (detect), a name, or one character
// that can separate CSV fields.
func ParseDelimiter(s string) (rune, error) {
	if s == "" {
		return 0, nil
	}
	if r, ok := store.DelimiterNames[strings.ToLower(s)]; ok {
		return r, nil
	}
	rs := []rune(s)
	// The characters encoding/csv refuses as a separator; NUL would also
	// mean "detect" to store.ImportOptions.
	if len(rs) != 1 || rs[0] == 0 || rs[0] == '"' || rs[0] == '\r' || rs[0] == '\n' || rs[0] == utf8.RuneError {
		return 0, fmt.Errorf("--delimiter %q: want one character (not a quote, a line break or NUL), or comma, semicolon, tab or pipe", s)
	}
	return rs[0], nil
}
