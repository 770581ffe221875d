package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version is set at build time: make build passes the output of git
// describe with -ldflags "-X main.version=...". A plain go build leaves
// "dev", and the version command then says which commit, if the build
// recorded one (go build -buildvcs=true).
var version = "dev"

func newVersionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the crffd version, the commit it was built from and the Go version",
		Example: `  crffd version
  # prints, for example: crffd v0.4.0-12-g1a2b3c4 (commit 1a2b3c4d5e6f, 2026-11-25T02:54:03Z, go1.26.0)`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			bi, _ := debug.ReadBuildInfo()
			_, err := fmt.Fprintln(a.stdout, versionString(version, bi))
			return err
		},
	}
}

// versionString describes a build: the version, then what the build
// recorded of its commit (its first 12 hex digits, time, whether the tree
// had uncommitted changes) and the Go version.
func versionString(v string, bi *debug.BuildInfo) string {
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
