package main

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryCommandHasExamples walks the command tree: every command that
// runs has an Example, and every "crffd ..." line of it names a command
// that exists and only flags that command has, so that an example breaks
// the build when a flag or command is renamed.
func TestEveryCommandHasExamples(t *testing.T) {
	root := rootCmd(&app{stdout: io.Discard, stderr: io.Discard})
	var walk func(c *cobra.Command)
	checked := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if !c.Runnable() || c.Hidden || c.Name() == "help" || c.Name() == "completion" || strings.HasPrefix(c.CommandPath(), "crffd completion") {
			return
		}
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s: no Example in its help", c.CommandPath())
			return
		}
		for _, line := range strings.Split(c.Example, "\n") {
			line = strings.TrimSpace(line)
			if i := strings.Index(line, " #"); i >= 0 {
				line = line[:i]
			}
			if !strings.HasPrefix(line, "crffd ") {
				continue
			}
			words := strings.Fields(line)[1:]
			target, rest, err := root.Find(words)
			if err != nil || target == root {
				t.Errorf("%s: example %q names no command (%v)", c.CommandPath(), line, err)
				continue
			}
			for _, w := range rest {
				if !strings.HasPrefix(w, "-") {
					continue
				}
				name := strings.TrimLeft(strings.SplitN(w, "=", 2)[0], "-")
				f := target.Flags().Lookup(name)
				if f == nil {
					f = target.InheritedFlags().Lookup(name)
				}
				if f == nil && len(name) == 1 {
					f = target.Flags().ShorthandLookup(name)
				}
				if f == nil {
					t.Errorf("%s: example %q uses %s, which %s does not have", c.CommandPath(), line, w, target.CommandPath())
				}
			}
			checked++
		}
	}
	walk(root)
	if checked < 20 {
		t.Errorf("checked %d example lines, want at least 20", checked)
	}
}
