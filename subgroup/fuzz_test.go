package subgroup_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/subgroup"
)

// FuzzCheck holds Check to its contract: it never panics, every refusal
// wraps ErrRefused, and a predicate it accepts is structurally harmless
// (checked here by a scanner written apart from Check's) and, inside the
// query crffd builds, either fails to prepare or opens no b-tree but
// records, calls no function outside Functions and leaves the database as
// it was.
func FuzzCheck(f *testing.F) {
	for _, p := range accepted {
		f.Add(p)
	}
	for _, r := range refused {
		f.Add(r.predicate)
	}
	s := newSandbox(f)
	f.Fuzz(func(t *testing.T, p string) {
		err := subgroup.Check(p, columns)
		if err != nil {
			if !errors.Is(err, subgroup.ErrRefused) {
				t.Fatalf("Check(%q) = %v, which does not wrap ErrRefused", p, err)
			}
			return
		}
		if err := structure(p); err != nil {
			t.Fatalf("Check accepted %q: %v", p, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		prepared, err := s.plan(ctx, p)
		if err != nil {
			t.Fatalf("Check accepted %q: %v", p, err)
		}
		if prepared {
			if err := s.run(ctx, p); errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
				t.Fatalf("Check accepted %q, which runs for more than 10s", p)
			}
		}
		if err := s.intact(); err != nil {
			t.Fatalf("Check accepted %q: %v", p, err)
		}
	})
}

// structure is the cheap half of the fuzz property: outside string literals
// there is no ';', no comment, no control character or NUL, parentheses
// never close the WHERE clause's own and balance at the end, every bare word
// is a column, an allowed keyword or an allowed function, and every quoted
// name is a column or an allowed function.
func structure(p string) error {
	if len(p) > 4096 || strings.IndexByte(p, 0) >= 0 {
		return errors.New("too long or contains NUL")
	}
	words := map[string]bool{}
	for _, w := range strings.Fields(`and or not is null in between like glob escape case when then else end
		true false collate nocase binary rtrim cast as integer real text numeric`) {
		words[w] = true
	}
	for _, w := range columns {
		words[fold(w)] = true
	}
	for _, w := range subgroup.Functions {
		words[w] = true
	}
	depth := 0
	for i := 0; i < len(p); {
		c := p[i]
		switch {
		case c == '\'' || c == '"' || c == '`' || c == '[':
			end := c
			if c == '[' {
				end = ']'
			}
			j := i + 1
			for ; j < len(p); j++ {
				if p[j] == end {
					if end != ']' && j+1 < len(p) && p[j+1] == end {
						j++
						continue
					}
					break
				}
			}
			if j >= len(p) {
				return fmt.Errorf("quote at %d never closed", i)
			}
			if c != '\'' {
				name := p[i+1 : j]
				if end != ']' {
					name = strings.ReplaceAll(name, string([]byte{end, end}), string(end))
				}
				if !slices.Contains(columns, fold(name)) && !slices.Contains(subgroup.Functions, fold(name)) {
					return fmt.Errorf("quoted name %q at %d is neither a column nor an allowed function", name, i)
				}
			}
			i = j + 1
		case c == ';':
			return fmt.Errorf("semicolon at %d", i)
		case strings.HasPrefix(p[i:], "--") || strings.HasPrefix(p[i:], "/*"):
			return fmt.Errorf("comment at %d", i)
		case c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7f:
			return fmt.Errorf("control character at %d", i)
		case c == '(':
			depth++
			i++
		case c == ')':
			depth--
			if depth < 0 {
				return fmt.Errorf(") at %d closes the WHERE clause", i)
			}
			i++
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(p) && p[i+1] >= '0' && p[i+1] <= '9':
			// A number, with its exponent sign: letters inside it (e, x,
			// hex digits) are not words.
			j := i + 1
			for j < len(p) && (isWordByte(p[j]) || p[j] == '.' ||
				(p[j] == '+' || p[j] == '-') && (p[j-1] == 'e' || p[j-1] == 'E') && !strings.HasPrefix(fold(p[i:]), "0x")) {
				j++
			}
			i = j
		case isWordByte(c):
			j := i + 1
			for j < len(p) && isWordByte(p[j]) {
				j++
			}
			if w := fold(p[i:j]); !words[w] {
				return fmt.Errorf("bare word %q at %d is not a column, keyword or function", w, i)
			}
			i = j
		default:
			i++
		}
	}
	if depth != 0 {
		return fmt.Errorf("parentheses end %d deep", depth)
	}
	return nil
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}

// fold lower-cases ASCII letters only, as SQLite does with names.
func fold(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
