package subgroup

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Functions are the SQL functions a predicate may call (lower-case). They
// are SQLite built-ins that are deterministic and read nothing but their
// arguments, so a call cannot reach other tables, the file or the clock.
// Check consults the slice on every call.
var Functions = []string{"abs", "coalesce", "ifnull", "length", "lower", "upper", "round", "substr", "instr", "trim", "ltrim", "rtrim", "nullif", "iif"}

// ErrRefused wraps every refusal, so that a caller can tell a predicate the
// user must rewrite (errors.Is) from a failure of its own.
var ErrRefused = errors.New("subgroup: predicate refused")

const (
	// maxLen bounds the text SQLite is asked to parse; no sensible subgroup
	// definition comes near it.
	maxLen = 4096
	// maxDepth bounds parenthesis nesting well below SQLite's expression
	// depth limit of 1000.
	maxDepth = 64
	// maxShown bounds how much of an offending token a message repeats.
	maxShown = 40
)

// allowedKeywords are the bare words that keep the predicate an expression
// over the row: logic, comparisons, CASE and literals. CAST and AS are
// allowed only in the shape CAST(x AS type), which the checker enforces.
var allowedKeywords = setOf("and", "or", "not", "is", "null", "in", "between", "like", "glob", "escape",
	"case", "when", "then", "else", "end", "true", "false", "collate", "cast", "as")

// collations are the built-in collating sequences; another name could only
// fail or pick up an application-defined collation.
var collations = setOf("nocase", "binary", "rtrim")

// castTypes are the storage classes CAST may convert to.
var castTypes = setOf("integer", "real", "text", "numeric")

// sqliteKeywords are the 147 keywords of SQLite 3.53 (sqlite3_keyword_name).
// A bare one that is not in allowedKeywords is refused even when it names a
// column, because SQLite may read it as the keyword: SELECT, VALUES, EXISTS,
// WITH and RAISE start subqueries or side effects, and the rest have no place
// in a predicate. A column with such a name must be written "quoted".
var sqliteKeywords = setOf("abort", "action", "add", "after", "all", "alter", "always", "analyze", "and",
	"as", "asc", "attach", "autoincrement", "before", "begin", "between", "by", "cascade", "case", "cast",
	"check", "collate", "column", "commit", "conflict", "constraint", "create", "cross", "current",
	"current_date", "current_time", "current_timestamp", "database", "default", "deferrable", "deferred",
	"delete", "desc", "detach", "distinct", "do", "drop", "each", "else", "end", "escape", "except",
	"exclude", "exclusive", "exists", "explain", "fail", "filter", "first", "following", "for", "foreign",
	"from", "full", "generated", "glob", "group", "groups", "having", "if", "ignore", "immediate", "in",
	"index", "indexed", "initially", "inner", "insert", "instead", "intersect", "into", "is", "isnull",
	"join", "key", "last", "left", "like", "limit", "match", "materialized", "natural", "no", "not",
	"nothing", "notnull", "null", "nulls", "of", "offset", "on", "or", "order", "others", "outer", "over",
	"partition", "plan", "pragma", "preceding", "primary", "query", "raise", "range", "recursive",
	"references", "regexp", "reindex", "release", "rename", "replace", "restrict", "returning", "right",
	"rollback", "row", "rows", "savepoint", "select", "set", "table", "temp", "temporary", "then", "ties",
	"to", "transaction", "trigger", "unbounded", "union", "unique", "update", "using", "vacuum", "values",
	"view", "virtual", "when", "where", "window", "with", "without")

// keywordHints turn the refusal of a keyword a user plausibly meant into
// advice; the default reason covers the keywords of statements and
// subqueries.
var keywordHints = map[string]string{
	"isnull":            "; write IS NULL instead",
	"notnull":           "; write IS NOT NULL instead",
	"distinct":          "; to compare values that may be NULL, write IS or IS NOT",
	"regexp":            "; write LIKE or GLOB instead",
	"match":             "; write LIKE or GLOB instead",
	"current_date":      "; a subgroup may not depend on the clock",
	"current_time":      "; a subgroup may not depend on the clock",
	"current_timestamp": "; a subgroup may not depend on the clock",
}

func setOf(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// Check returns nil when predicate is a boolean SQL expression over columns
// alone, and otherwise an error wrapping ErrRefused whose message says why in
// plain words a user can act on, naming the offending token and its byte
// offset (e.g. `subgroup: predicate refused: "records" at 23 is not a column
// of the site's table`).
//
// columns are the names of the site table's columns; they are compared the
// way SQLite compares identifiers, ignoring ASCII case only. Check vets the
// tokens, not the grammar: see the package documentation for what is left to
// SQLite.
func Check(predicate string, columns []string) error {
	if len(predicate) > maxLen {
		return fmt.Errorf("%w: the predicate is %d bytes long, more than the limit of %d bytes", ErrRefused, len(predicate), maxLen)
	}
	if strings.TrimSpace(predicate) == "" {
		return fmt.Errorf("%w: the predicate is empty; write a condition on the table's columns, such as age >= 65", ErrRefused)
	}
	c := &checker{
		src:     predicate,
		columns: columns,
		cols:    make(map[string]bool, len(columns)),
		funcs:   make(map[string]bool, len(Functions)),
	}
	for _, col := range columns {
		c.cols[foldASCII(col)] = true
	}
	for _, f := range Functions {
		c.funcs[foldASCII(f)] = true
	}
	return c.run()
}

// kind is the class of a token as far as the checker cares.
type kind uint8

const (
	kNone      kind = iota // before the first token
	kKeyword               // an allowed keyword; word holds it folded
	kColumn                // a column reference
	kFunc                  // a function name, followed by "("
	kCollation             // the name after COLLATE
	kType                  // the type after CAST(x AS
	kLiteral               // a number or a string
	kOp                    // an operator
	kOpen                  // (
	kClose                 // )
	kComma                 // ,
)

type token struct {
	kind kind
	word string // folded keyword, for kKeyword
	off  int
}

// frameKind records what a "(" opened, since that decides whether commas
// and AS may appear directly inside it.
type frameKind uint8

const (
	fGroup frameKind = iota
	fCall
	fList
	fCast
)

type frame struct {
	kind  frameKind
	off   int
	sawAS bool
}

// expect is a constraint the previous token puts on the next one.
type expect uint8

const (
	eNone      expect = iota
	eListOpen         // after IN: "(", so IN cannot name a table
	eCastOpen         // after CAST: "("
	eCollation        // after COLLATE: NOCASE, BINARY or RTRIM
	eType             // after CAST(x AS: a type name
	eCastClose        // after the type: ")"
)

type checker struct {
	src     string
	columns []string
	cols    map[string]bool
	funcs   map[string]bool
	stack   []frame
	prev    token
	expect  expect
	expOff  int // offset of the token that set expect
}

func (c *checker) run() error {
	src := c.src
	n := len(src)
	// SQLite stops reading at a NUL even inside a string, so a NUL would
	// cut the query short wherever it stands.
	if k := strings.IndexByte(src, 0); k >= 0 {
		return c.refuse(k, "", "a NUL byte", "is not allowed in a predicate, not even inside a string; remove it")
	}
	for i := 0; i < n; {
		b := src[i]
		switch {
		case b == ' ' || b == '\t' || b == '\n' || b == '\r':
			i++
		case b < 0x20 || b == 0x7f:
			return c.refuse(i, "", fmt.Sprintf("the control character %U", rune(b)), "is not allowed outside a string; use spaces, tabs and line breaks only")
		case b == '\'':
			end, ok := scanQuoted(src, i, '\'')
			if !ok {
				return c.refuse(i, src[i:], "", "is a string that is never closed; end it with a single quote (write '' for a quote inside it)")
			}
			if err := c.accept(token{kind: kLiteral, off: i}); err != nil {
				return err
			}
			i = end
		case b == '"' || b == '`' || b == '[':
			end, ok := scanQuoted(src, i, closer(b))
			if !ok {
				return c.refuse(i, src[i:], "", fmt.Sprintf("is a quoted name that is never closed; end it with %c", closer(b)))
			}
			if err := c.name(i, end, true); err != nil {
				return err
			}
			i = end
		case isIDStart(b):
			end := i + 1
			for end < n && isIDChar(src[end]) {
				end++
			}
			if end == i+1 && (b == 'x' || b == 'X') && end < n && src[end] == '\'' {
				stop, ok := scanQuoted(src, end, '\'')
				if !ok {
					stop = n
				}
				return c.refuse(i, src[i:stop], "", "is a blob literal, which a predicate may not use; compare with a number or a string")
			}
			if err := c.name(i, end, false); err != nil {
				return err
			}
			i = end
		case isDigit(b) || b == '.' && i+1 < n && isDigit(src[i+1]):
			end, ok := scanNumber(src, i)
			if !ok {
				return c.refuse(i, src[i:end], "", "is not a number SQLite reads; write digits with an optional decimal point and exponent (such as 65, 0.5 or 1e3), or 0x followed by hex digits, with no letters or underscores attached")
			}
			if err := c.accept(token{kind: kLiteral, off: i}); err != nil {
				return err
			}
			i = end
		case b == '.':
			return c.refuse(i, ".", "", "is a dot outside a number; a predicate names columns alone, without a table or schema in front")
		case b == ';':
			return c.refuse(i, ";", "", "would end the statement and start another; a predicate may contain a semicolon only inside a 'string'")
		case b == '?' || b == ':' || b == '@' || b == '$' || b == '#':
			end := i + 1
			for end < n && isIDChar(src[end]) {
				end++
			}
			return c.refuse(i, src[i:end], "", "is a bind parameter, which a predicate may not use; write the value itself")
		case b == '(':
			if err := c.accept(token{kind: kOpen, off: i}); err != nil {
				return err
			}
			i++
		case b == ')':
			if err := c.accept(token{kind: kClose, off: i}); err != nil {
				return err
			}
			i++
		case b == ',':
			if err := c.accept(token{kind: kComma, off: i}); err != nil {
				return err
			}
			i++
		default:
			end, err := c.operator(i)
			if err != nil {
				return err
			}
			if err := c.accept(token{kind: kOp, off: i}); err != nil {
				return err
			}
			i = end
		}
	}
	switch c.expect {
	case eListOpen:
		return c.refuse(c.expOff, "IN", "", "ends the predicate; IN must be followed by a list of values in parentheses, such as IN (1, 2)")
	case eCastOpen:
		return c.refuse(c.expOff, "CAST", "", "ends the predicate; write CAST(column AS INTEGER), REAL, TEXT or NUMERIC")
	case eCollation:
		return c.refuse(c.expOff, "COLLATE", "", "ends the predicate; COLLATE must be followed by NOCASE, BINARY or RTRIM")
	case eType:
		return c.refuse(c.expOff, "AS", "", "ends the predicate; CAST(x AS ...) needs INTEGER, REAL, TEXT or NUMERIC")
	case eCastClose:
		return c.refuse(c.expOff, c.tokenText(c.expOff), "", "must be followed by ) to close the CAST")
	}
	if len(c.stack) > 0 {
		top := c.stack[len(c.stack)-1]
		return c.refuse(top.off, "(", "", "is never closed; add a ) so that the parentheses balance")
	}
	return nil
}

// operator reads the operator at i and returns its end, refusing the
// character sequences that are not operators of a predicate.
func (c *checker) operator(i int) (int, error) {
	src := c.src
	next := byte(0)
	if i+1 < len(src) {
		next = src[i+1]
	}
	switch b := src[i]; b {
	case '-':
		switch next {
		case '-':
			return 0, c.refuse(i, "--", "", "starts a comment, which would hide the rest of the query; remove it (to subtract a negative number write a - (-1))")
		case '>':
			end := i + 2
			if end < len(src) && src[end] == '>' {
				end++
			}
			return 0, c.refuse(i, src[i:end], "", "is a JSON operator, which a predicate may not use")
		}
		return i + 1, nil
	case '/':
		if next == '*' {
			return 0, c.refuse(i, "/*", "", "starts a comment, which would hide the rest of the query; remove it")
		}
		return i + 1, nil
	case '+', '*', '%', '~', '&':
		return i + 1, nil
	case '|':
		if next == '|' {
			return i + 2, nil
		}
		return i + 1, nil
	case '=':
		if next == '=' {
			return i + 2, nil
		}
		return i + 1, nil
	case '<':
		if next == '=' || next == '>' || next == '<' {
			return i + 2, nil
		}
		return i + 1, nil
	case '>':
		if next == '=' || next == '>' {
			return i + 2, nil
		}
		return i + 1, nil
	case '!':
		if next == '=' {
			return i + 2, nil
		}
	}
	r, size := utf8.DecodeRuneInString(src[i:])
	return 0, c.refuse(i, src[i:i+size], "", fmt.Sprintf("is not an operator a predicate may use (character %U)", r))
}

// name handles the identifier at src[start:end], bare or quoted. What
// SQLite makes of a name depends on what follows it, so the text after it is
// looked at here.
func (c *checker) name(start, end int, quoted bool) error {
	raw := c.src[start:end]
	bare := !quoted
	word := foldASCII(raw)
	if quoted {
		word = foldASCII(unquote(raw))
	}
	if c.expect == eListOpen || c.expect == eCastOpen {
		return c.accept(token{kind: kColumn, off: start}) // refused there
	}
	next := skipSpace(c.src, end)
	if next < len(c.src) && c.src[next] == '.' && !(next+1 < len(c.src) && isDigit(c.src[next+1])) {
		stop := skipSpace(c.src, next+1)
		if stop < len(c.src) {
			stop = nameEnd(c.src, stop)
		}
		return c.refuse(start, c.src[start:stop], "", "is a dotted name, which reaches another table or schema; write the column name alone")
	}
	call := next < len(c.src) && c.src[next] == '('

	switch c.expect {
	case eCollation:
		if bare && collations[word] {
			return c.accept(token{kind: kCollation, off: start})
		}
		return c.refuse(start, raw, "", "is not a collation a predicate may use; COLLATE must be followed by NOCASE, BINARY or RTRIM, unquoted")
	case eType:
		if bare && castTypes[word] {
			return c.accept(token{kind: kType, off: start})
		}
		return c.refuse(start, raw, "", "is not a type a predicate may CAST to; write INTEGER, REAL, TEXT or NUMERIC, unquoted")
	}

	if bare && allowedKeywords[word] {
		return c.accept(token{kind: kKeyword, word: word, off: start})
	}
	if call {
		// SQLite calls a function by any name, bare or quoted, that is
		// followed by "(", so the call is vetted before the column.
		if c.funcs[word] {
			return c.accept(token{kind: kFunc, off: start})
		}
		if bare && sqliteKeywords[word] && word != "replace" {
			return c.refuseKeyword(start, raw, word)
		}
		return c.refuse(start, raw, "", "is not a function a predicate may call; the allowed functions are "+strings.Join(Functions, ", "))
	}
	if bare && sqliteKeywords[word] {
		return c.refuseKeyword(start, raw, word)
	}
	if c.cols[word] {
		return c.accept(token{kind: kColumn, off: start})
	}
	reason := "is not a column of the site's table"
	if strings.IndexFunc(raw, func(r rune) bool { return r >= utf8.RuneSelf && (unicode.IsSpace(r) || unicode.Is(unicode.Cf, r)) }) >= 0 {
		reason += "; it contains a non-breaking or other Unicode space, which SQLite reads as part of the name: replace it with an ordinary space"
	} else if len(c.columns) > 0 && len(c.columns) <= 30 {
		reason += "; its columns are " + strings.Join(c.columns, ", ")
	}
	return c.refuse(start, raw, "", reason)
}

func (c *checker) refuseKeyword(off int, raw, word string) error {
	reason := "is an SQL keyword a predicate may not use; a predicate is one condition on the table's columns, without subqueries, other tables or other statements"
	if h, ok := keywordHints[word]; ok {
		reason = "is an SQL keyword a predicate may not use" + h
	}
	if c.cols[word] {
		reason += fmt.Sprintf("; to mean the column of that name, write it in double quotes: %q", word)
	}
	return c.refuse(off, raw, "", reason)
}

// accept applies the rules that depend on neighbouring tokens: what may
// follow IN, CAST, AS and COLLATE, where commas may stand, and the depth of
// the parentheses, which must never fall below the WHERE clause's own.
func (c *checker) accept(t token) error {
	switch c.expect {
	case eListOpen:
		if t.kind != kOpen {
			return c.refuse(c.expOff, "IN", "", "must be followed by a list of values in parentheses, such as IN (1, 2); IN followed by a name would read a table")
		}
	case eCastOpen:
		if t.kind != kOpen {
			return c.refuse(c.expOff, "CAST", "", "must be followed by (; write CAST(column AS INTEGER), REAL, TEXT or NUMERIC")
		}
	case eCollation:
		// name() refuses a word that does not fit; other tokens land here.
		if t.kind != kCollation {
			return c.refuse(t.off, c.tokenText(t.off), "", "is out of place; COLLATE must be followed by NOCASE, BINARY or RTRIM")
		}
	case eType:
		if t.kind != kType {
			return c.refuse(t.off, c.tokenText(t.off), "", "is out of place; CAST(x AS ...) needs INTEGER, REAL, TEXT or NUMERIC")
		}
	case eCastClose:
		if t.kind != kClose {
			return c.refuse(t.off, c.tokenText(t.off), "", "is out of place; CAST(x AS type) must end with ) right after the type")
		}
	}
	c.expect = eNone

	switch t.kind {
	case kKeyword:
		switch t.word {
		case "in":
			c.expect, c.expOff = eListOpen, t.off
		case "cast":
			c.expect, c.expOff = eCastOpen, t.off
		case "collate":
			c.expect, c.expOff = eCollation, t.off
		case "as":
			if len(c.stack) == 0 || c.stack[len(c.stack)-1].kind != fCast || c.stack[len(c.stack)-1].sawAS {
				return c.refuse(t.off, c.src[t.off:t.off+2], "", "may appear only inside CAST(column AS type)")
			}
			c.stack[len(c.stack)-1].sawAS = true
			c.expect, c.expOff = eType, t.off
		}
	case kType:
		c.expect, c.expOff = eCastClose, t.off
	case kOpen:
		if len(c.stack) >= maxDepth {
			return c.refuse(t.off, "(", "", fmt.Sprintf("nests parentheses more than %d deep; simplify the predicate", maxDepth))
		}
		f := frame{kind: fGroup, off: t.off}
		switch {
		case c.prev.kind == kFunc:
			f.kind = fCall
		case c.prev.kind == kKeyword && c.prev.word == "in":
			f.kind = fList
		case c.prev.kind == kKeyword && c.prev.word == "cast":
			f.kind = fCast
		}
		c.stack = append(c.stack, f)
	case kClose:
		if len(c.stack) == 0 {
			return c.refuse(t.off, ")", "", "closes a parenthesis that was never opened; it would close the query's WHERE clause, so the parentheses of a predicate must balance")
		}
		c.stack = c.stack[:len(c.stack)-1]
	case kComma:
		if len(c.stack) == 0 || (c.stack[len(c.stack)-1].kind != fCall && c.stack[len(c.stack)-1].kind != fList) {
			return c.refuse(t.off, ",", "", "may separate only the arguments of a function or the values of an IN list; a predicate is a single condition")
		}
	}
	c.prev = t
	return nil
}

// tokenText is the token at off, roughly, for messages about a token whose
// end the caller did not keep.
func (c *checker) tokenText(off int) string {
	return c.src[off:nameEnd(c.src, off)]
}

// refuse builds the error. The token is shown quoted; desc, when not
// empty, replaces it for tokens that cannot be shown, such as NUL.
func (c *checker) refuse(off int, tok, desc, reason string) error {
	if desc == "" {
		desc = show(tok)
	}
	return fmt.Errorf("%w: %s at %d %s", ErrRefused, desc, off, reason)
}

// show quotes tok for a message, shortened, in the quotes least likely to
// need escapes, since users will compare it with what they typed.
func show(tok string) string {
	if len(tok) > maxShown {
		cut := maxShown
		for cut > 0 && !utf8.RuneStart(tok[cut]) {
			cut--
		}
		tok = tok[:cut] + "…"
	}
	printable := utf8.ValidString(tok) && strings.IndexFunc(tok, func(r rune) bool { return !unicode.IsPrint(r) }) < 0
	switch {
	case printable && !strings.Contains(tok, `"`):
		return `"` + tok + `"`
	case printable && !strings.Contains(tok, "`"):
		return "`" + tok + "`"
	}
	return strconv.Quote(tok)
}

// scanQuoted returns the end of the quoted token that starts at src[i],
// closed by close; a doubled close inside it stands for one, except in
// [brackets], which SQLite ends at the first ].
func scanQuoted(src string, i int, close byte) (int, bool) {
	for j := i + 1; j < len(src); j++ {
		if src[j] != close {
			continue
		}
		if close != ']' && j+1 < len(src) && src[j+1] == close {
			j++
			continue
		}
		return j + 1, true
	}
	return len(src), false
}

func closer(open byte) byte {
	if open == '[' {
		return ']'
	}
	return open
}

func isQuote(b byte) bool { return b == '"' || b == '`' || b == '[' }

// unquote returns the name a quoted identifier stands for.
func unquote(q string) string {
	open, body := q[0], q[1:len(q)-1]
	if open == '[' {
		return body
	}
	return strings.ReplaceAll(body, string([]byte{open, open}), string(open))
}

// scanNumber returns the end of the numeric literal at src[i] and whether
// SQLite reads it as one number: its tokenizer turns a literal with an
// identifier character stuck to it (1abc, 0x, 1_000) into an error or a
// different token, and such input is refused rather than second-guessed.
func scanNumber(src string, i int) (int, bool) {
	n := len(src)
	j := i
	if j+2 < n && src[j] == '0' && (src[j+1] == 'x' || src[j+1] == 'X') && isHex(src[j+2]) {
		j += 2
		for j < n && isHex(src[j]) {
			j++
		}
	} else {
		for j < n && isDigit(src[j]) {
			j++
		}
		if j < n && src[j] == '.' {
			j++
			for j < n && isDigit(src[j]) {
				j++
			}
		}
		if j < n && (src[j] == 'e' || src[j] == 'E') {
			if j+1 < n && isDigit(src[j+1]) {
				j += 2
			} else if j+2 < n && (src[j+1] == '+' || src[j+1] == '-') && isDigit(src[j+2]) {
				j += 3
			}
			for j < n && isDigit(src[j]) {
				j++
			}
		}
	}
	if j < n && isIDChar(src[j]) {
		for j < n && isIDChar(src[j]) {
			j++
		}
		return j, false
	}
	return j, true
}

// nameEnd returns the end of the name (bare or quoted) at src[i], or i+1
// when there is none; it only shapes messages about dotted names.
func nameEnd(src string, i int) int {
	if isQuote(src[i]) {
		end, _ := scanQuoted(src, i, closer(src[i]))
		return end
	}
	j := i
	for j < len(src) && isIDChar(src[j]) {
		j++
	}
	if j == i {
		return i + 1
	}
	return j
}

func skipSpace(src string, i int) int {
	for i < len(src) && (src[i] == ' ' || src[i] == '\t' || src[i] == '\n' || src[i] == '\r') {
		i++
	}
	return i
}

// isIDStart and isIDChar follow SQLite's tokenizer, which treats every byte
// of 0x80 and above as part of a name and allows $ after the first byte.
func isIDStart(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b == '_' || b >= 0x80
}

func isIDChar(b byte) bool { return isIDStart(b) || isDigit(b) || b == '$' }

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

func isHex(b byte) bool { return isDigit(b) || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F' }

// foldASCII lower-cases ASCII letters only, as SQLite does when it compares
// identifiers; strings.ToLower would also fold letters SQLite keeps apart.
func foldASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= 'A' && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
