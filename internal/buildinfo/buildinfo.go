// Package buildinfo describes a build of crffd for crffd version: the
// version make build stamps, and what the Go toolchain recorded of the
// commit.
package buildinfo

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Describe describes a build of crffd at version v: the version, then what the build
// recorded of its commit (its first 12 hex digits, time, whether the tree
// had uncommitted changes) and the Go version.
func Describe(v string, bi *debug.BuildInfo) string {
	var detail []string
	if bi != nil {
		var rev, at string
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if rev != "" {
			c := "commit " + rev[:min(12, len(rev))]
			if modified {
				c += " with uncommitted changes"
			}
			detail = append(detail, c)
		}
		if at != "" {
			detail = append(detail, at)
		}
		if bi.GoVersion != "" {
			detail = append(detail, bi.GoVersion)
		}
	}
	if v == "dev" && len(detail) > 0 && !strings.HasPrefix(detail[0], "commit") {
		detail = append([]string{"no version or commit recorded: build with make build"}, detail...)
	}
	if len(detail) == 0 {
		return "crffd " + v
	}
	return fmt.Sprintf("crffd %s (%s)", v, strings.Join(detail, ", "))
}
