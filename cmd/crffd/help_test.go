package main

import (
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/config"
)

// TestEveryCommandHasExamples walks the command tree of rootCmd: every
// command that runs has an Example, indented two spaces, with at least
// one line running that very command, and every crffd line of it names a
// command that exists, only flags that command has (its own and those it
// inherits), valid flag values, the arguments the command accepts and only
// CRFFD_ variables of real configuration keys. An example thus breaks the
// build when a command, flag or key is renamed.
func TestEveryCommandHasExamples(t *testing.T) {
	root := rootCmd(&app{stdout: io.Discard, stderr: io.Discard})
	var runnable []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && !c.Hidden {
			runnable = append(runnable, c)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	var paths []string
	for _, c := range runnable {
		paths = append(paths, c.CommandPath())
	}
	// The walk reaches the subcommands, and the commands whose examples
	// others write; a command added later is walked without being listed.
	for _, want := range []string{"crffd fit", "crffd import", "crffd check", "crffd site", "crffd coordinator",
		"crffd certs issue", "crffd certs renew", "crffd certs revoke", "crffd config show", "crffd kernels verify"} {
		if !slices.Contains(paths, want) {
			t.Errorf("the walk of the command tree did not reach %s; it found %v", want, paths)
		}
	}
	for _, c := range runnable {
		t.Run(strings.ReplaceAll(c.CommandPath(), " ", "_"), func(t *testing.T) {
			if strings.TrimSpace(c.Example) == "" {
				t.Fatalf("%s has no Example in its help", c.CommandPath())
			}
			for _, l := range strings.Split(c.Example, "\n") {
				if strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "  ") {
					t.Errorf("%s: example line %q is not indented two spaces", c.CommandPath(), l)
				}
			}
			lines, err := exampleCommands(c.Example)
			if err != nil {
				t.Fatalf("%s: %v", c.CommandPath(), err)
			}
			self := 0
			for _, args := range lines {
				target, err := checkExample(args)
				if err != nil {
					t.Errorf("%s: example %q: %v", c.CommandPath(), "crffd "+strings.Join(args, " "), err)
					continue
				}
				if target.CommandPath() == c.CommandPath() {
					self++
				}
			}
			if self == 0 {
				t.Errorf("%s: no example runs %s; the crffd lines are %q", c.CommandPath(), c.CommandPath(), lines)
			}
		})
	}
}

// TestExampleChecker: the checker of TestEveryCommandHasExamples accepts
// good lines and names what is wrong with bad ones.
func TestExampleChecker(t *testing.T) {
	for _, tc := range []struct {
		name    string
		example string
		want    string // the command the line runs, or "" if none
		err     string // part of the error, or "" if none
	}{
		{name: "flag and value", example: "  crffd fit --config hospital-a.yaml", want: "crffd fit"},
		{name: "flag=value and an inherited flag", example: "  crffd fit --config=hospital-a.yaml --log-level debug", want: "crffd fit"},
		{name: "bin/crffd", example: "  bin/crffd version", want: "crffd version"},
		{name: "help shorthand", example: "  crffd fit -h", want: "crffd fit"},
		{name: "persistent flag of the parent", example: "  crffd certs issue hospital-a --dir ca/ --out hospital-a/", want: "crffd certs issue"},
		{name: "list flag", example: "  crffd certs renew coordinator --dir ca/ --host a.example.org,b.example.org", want: "crffd certs renew"},
		{name: "env assignment, double quotes, comment", example: `  CRFFD_MODEL_SEED=7 crffd config show --config "my site.yaml"   # a comment`, want: "crffd config show"},
		{name: "command substitution, map entry variable, single quotes", example: `  CRFFD_FEDERATION_SECRET="$(cat secret)" CRFFD_PLUGIN_SHA256_CRFF_KERNEL_RQ=ab crffd site --config 'a b.yaml' --once`, want: "crffd site"},
		{name: "backslash continuation", example: "  crffd eval --data ihdp \\\n    --source-size 249 --split 50,100,99", want: "crffd eval"},
		{name: "pipe", example: "  crffd kernels list | grep gaussian", want: "crffd kernels list"},
		{name: "not crffd", example: "  sqlite3 clinic.sqlite 'SELECT * FROM crff_ate'"},
		{name: "comment line", example: "  # crffd fit --no-such-flag"},
		{name: "unknown flag", example: "  crffd fit --no-such-flag", err: "unknown flag: --no-such-flag"},
		{name: "flag without its value", example: "  crffd fit --config hospital-a.yaml --db", err: "flag needs an argument"},
		{name: "unknown shorthand", example: "  crffd version -v", err: "unknown shorthand flag: 'v'"},
		{name: "bad flag value", example: "  crffd kernels verify --pairs many", err: `invalid argument "many"`},
		{name: "unknown command", example: "  crffd frobnicate --config hospital-a.yaml", err: "unknown command"},
		{name: "command that only groups", example: "  crffd certs frobnicate", err: "crffd certs does not run"},
		{name: "missing argument", example: "  crffd certs issue --dir ca/", err: "accepts 1 arg(s), received 0"},
		{name: "extra argument", example: "  crffd site --config hospital-a.yaml extra", err: `unknown command "extra"`},
		{name: "no command", example: "  crffd --config hospital-a.yaml", err: "names no command"},
		{name: "variable of no key", example: "  CRFFD_MODEL_SEEDS=7 crffd fit", err: "CRFFD_MODEL_SEEDS sets no configuration key"},
		{name: "unterminated quote", example: `  crffd fit --config "hospital-a.yaml`, err: "unterminated quote"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines, err := exampleCommands(tc.example)
			var target *cobra.Command
			if err == nil && len(lines) > 0 {
				if len(lines) != 1 {
					t.Fatalf("%d command lines %q, want 1", len(lines), lines)
				}
				target, err = checkExample(lines[0])
			}
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want one saying %q", err, tc.err)
				}
			case err != nil:
				t.Errorf("error %v, want none", err)
			case tc.want == "" && target != nil:
				t.Errorf("runs %s, want no crffd line", target.CommandPath())
			case tc.want != "" && (target == nil || target.CommandPath() != tc.want):
				t.Errorf("runs %v, want %s", target, tc.want)
			}
		})
	}
}

// exampleCommands returns the arguments after "crffd" of every line of an
// Example that runs crffd (bin/crffd too), after any VAR=value assignments
// and up to a pipe, redirection or command separator. Lines ending with a
// backslash go on on the next line; comments are left out.
func exampleCommands(example string) ([][]string, error) {
	var out [][]string
	text := strings.ReplaceAll(example, "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		words, err := shellWords(line)
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", strings.TrimSpace(line), err)
		}
		for len(words) > 0 && envAssignment.MatchString(words[0]) {
			name, _, _ := strings.Cut(words[0], "=")
			if strings.HasPrefix(name, config.EnvPrefix+"_") && !knownEnv(name) {
				return nil, fmt.Errorf("line %q: %s sets no configuration key", strings.TrimSpace(line), name)
			}
			words = words[1:]
		}
		if len(words) == 0 || path.Base(words[0]) != "crffd" {
			continue
		}
		if i := slices.IndexFunc(words, func(w string) bool { return shellOperators[w] }); i >= 0 {
			words = words[:i]
		}
		out = append(out, words[1:])
	}
	return out, nil
}

var (
	envAssignment  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	shellOperators = map[string]bool{"|": true, "||": true, "&&": true, ";": true, "&": true, ">": true, ">>": true, "<": true, "2>": true, "2>&1": true}
)

// knownEnv reports whether the CRFFD_ variable name sets a configuration
// key: a key's own variable, or an entry of a map key.
func knownEnv(name string) bool {
	for _, s := range config.Settings {
		if name == config.EnvName(s.Key) || config.IsMap(s.Default) && strings.HasPrefix(name, config.EnvName(s.Key)+"_") {
			return true
		}
	}
	return false
}

// shellWords splits a line into words as a POSIX shell does for simple
// lines: blanks separate words, single quotes keep everything, double
// quotes keep everything but a backslash escape, a backslash escapes the
// next character, and a # at the start of a word begins a comment.
// Expansions ($VAR, $(...)) are kept as written.
func shellWords(line string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord, escaped := false, false
	var quote rune
	for _, r := range line {
		switch {
		case escaped:
			w.WriteRune(r)
			escaped = false
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				w.WriteRune(r)
			}
		case quote == '"':
			switch r {
			case '"':
				quote = 0
			case '\\':
				escaped = true
			default:
				w.WriteRune(r)
			}
		case r == '\\':
			escaped, inWord = true, true
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '#' && !inWord:
			return words, nil
		case unicode.IsSpace(r):
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 || escaped {
		return nil, errors.New("unterminated quote or escape")
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// checkExample finds the command args (the words after crffd) run in a
// fresh command tree, and parses its flags and arguments as cobra does
// when it runs it, which merges the flags it inherits into its own: it
// returns the command, or why cobra would refuse the line.
func checkExample(args []string) (*cobra.Command, error) {
	root := rootCmd(&app{stdout: io.Discard, stderr: io.Discard})
	target, rest, err := root.Find(args)
	if err != nil {
		return nil, err
	}
	if target == root {
		return nil, errors.New("names no command")
	}
	if !target.Runnable() {
		return nil, fmt.Errorf("%s does not run: it only groups %d subcommands", target.CommandPath(), len(target.Commands()))
	}
	target.InitDefaultHelpFlag()
	if err := target.ParseFlags(rest); err != nil {
		return nil, fmt.Errorf("%s: %w", target.CommandPath(), err)
	}
	if err := target.ValidateArgs(target.Flags().Args()); err != nil {
		return nil, fmt.Errorf("%s: %w", target.CommandPath(), err)
	}
	return target, nil
}
