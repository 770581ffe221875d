// Package docs holds crffd's documentation pages. Its test checks that every
// relative link of the README and of these pages leads to a file of the
// repository, and every #anchor to a heading or an id of the page it names,
// so that moving or renaming a page or a section cannot leave a dead link.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's root, relative to this package.
const root = ".."

var (
	// fence opens or closes a fenced code block; links inside one are code.
	fence = regexp.MustCompile("^\\s*(```|~~~)")
	// codeSpan is inline code, whose brackets are not links.
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	// link is an inline Markdown link or image: [text](target) or
	// [text](target "title").
	link = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// heading is an ATX heading.
	heading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	// htmlID is an explicit anchor such as <a id="positivity"></a>.
	htmlID = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
)

// slug turns a heading into its anchor as GitHub does: lower case, letters,
// digits, '-' and '_' kept, spaces turned into '-', everything else dropped.
func slug(h string) string {
	h = codeSpan.ReplaceAllStringFunc(h, func(s string) string { return strings.Trim(s, "`") })
	// A link in a heading keeps its text only.
	h = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// page is what the check needs of one Markdown file: its relative links and
// the anchors it defines.
type page struct {
	links   []string
	anchors map[string]bool
}

// parse reads the links and anchors of a Markdown text, skipping fenced
// code blocks and inline code.
func parse(text string) page {
	p := page{anchors: map[string]bool{}}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range htmlID.FindAllStringSubmatch(line, -1) {
			p.anchors[m[1]] = true
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			s := slug(m[1])
			if n := seen[s]; n > 0 {
				p.anchors[s+"-"+strconv.Itoa(n)] = true
			} else {
				p.anchors[s] = true
			}
			seen[s]++
		}
		for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			p.links = append(p.links, m[1])
		}
	}
	return p
}

// external reports whether a link leaves the repository (a URL or a mail
// address); those are not checked here.
func external(target string) bool {
	for _, p := range []string{"http://", "https://", "mailto:", "ftp://"} {
		if strings.HasPrefix(target, p) {
			return true
		}
	}
	return false
}

// broken checks the links of the page at path (relative to the working
// directory) and returns one message per link that does not resolve. read
// gives a page's text, so that tests can check pages that are not files.
func broken(path string, read func(string) (string, error)) ([]string, error) {
	text, err := read(path)
	if err != nil {
		return nil, err
	}
	self := parse(text)
	rootAbs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	var bad []string
	for _, l := range self.links {
		if external(l) {
			continue
		}
		target, anchor, _ := strings.Cut(l, "#")
		dest := path
		if target != "" {
			if strings.HasPrefix(target, "/") {
				bad = append(bad, l+": an absolute path, which breaks outside the repository's root")
				continue
			}
			dest = filepath.Join(filepath.Dir(path), filepath.FromSlash(target))
			abs, err := filepath.Abs(dest)
			if err != nil {
				return nil, err
			}
			if rel, err := filepath.Rel(rootAbs, abs); err != nil || strings.HasPrefix(rel, "..") {
				bad = append(bad, l+": leads outside the repository")
				continue
			}
			if _, err := os.Stat(dest); err != nil {
				bad = append(bad, l+": no such file in the repository")
				continue
			}
		}
		if anchor == "" || !strings.HasSuffix(dest, ".md") {
			continue
		}
		anchors := self.anchors
		if target != "" {
			t, err := read(dest)
			if err != nil {
				return nil, err
			}
			anchors = parse(t).anchors
		}
		if !anchors[anchor] {
			bad = append(bad, l+": no heading or id #"+anchor+" in "+filepath.ToSlash(dest))
		}
	}
	return bad, nil
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

// TestLinks checks every relative link of README.md and docs/*.md.
func TestLinks(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"))
	sort.Strings(pages)
	if len(pages) < 5 {
		t.Fatalf("found only %v", pages)
	}
	for _, p := range pages {
		t.Run(filepath.Base(p), func(t *testing.T) {
			bad, err := broken(p, readFile)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range bad {
				t.Errorf("%s: broken link %s", filepath.ToSlash(p), b)
			}
			text, _ := readFile(p)
			t.Logf("%d links checked", len(parse(text).links))
		})
	}
}

// TestChecker runs the checker on pages made up for the purpose, so that a
// broken link is known to fail the check.
func TestChecker(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		bad  int
	}{
		{"a file that exists", "see [the protocol](protocol.md)", 0},
		{"a file that does not", "see [nothing](nothing.md)", 1},
		{"a folder", "see [the estimator](../estimator)", 0},
		{"a heading of another page", "[exit](operations.md#exit-statuses)", 0},
		{"a heading another page lacks", "[exit](operations.md#no-such-heading)", 1},
		{"a heading of the same page", "## Two words, and more\n[up](#two-words-and-more)", 0},
		{"a repeated heading", "## A\n## A\n[second](#a-1)", 0},
		{"an explicit id", `<a id="here"></a>text [here](#here)`, 0},
		{"an anchor the page lacks", "## A\n[b](#b)", 1},
		{"a heading with code", "## The `crff_ate` view\n[v](#the-crff_ate-view)", 0},
		{"a link in code is not checked", "`[x](nothing.md)`\n```\n[y](nothing.md)\n```", 0},
		{"a URL is not checked", "[go](https://go.dev/nothing.md)", 0},
		{"outside the repository", "[up](../../x.md)", 1},
		{"an absolute path", "[abs](/README.md)", 1},
		{"the README", "[readme](../README.md#quick-start)", 0},
		{"a link with a title", `[p](privacy.md "the threat model")`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const self = "made-up.md"
			read := func(path string) (string, error) {
				if path == self {
					return tc.text, nil
				}
				return readFile(path)
			}
			bad, err := broken(self, read)
			if err != nil {
				t.Fatal(err)
			}
			if len(bad) != tc.bad {
				t.Errorf("%d broken links %q, want %d", len(bad), bad, tc.bad)
			}
		})
	}
}

// TestSlug pins the anchor rule on headings of these pages.
func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Quick start", "quick-start"},
		{"What leaves a site, and what never does", "what-leaves-a-site-and-what-never-does"},
		{"Reproducing the paper's tables", "reproducing-the-papers-tables"},
		{"Accuracy and coverage against ε", "accuracy-and-coverage-against-ε"},
		{"crff_balance", "crff_balance"},
		{"The `estimator`'s log", "the-estimators-log"},
		{"Choosing the estimator and the kernel on held-out rows", "choosing-the-estimator-and-the-kernel-on-held-out-rows"},
	} {
		if got := slug(tc.heading); got != tc.want {
			t.Errorf("slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}
