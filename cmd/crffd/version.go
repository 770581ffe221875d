package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/internal/buildinfo"
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
			_, err := fmt.Fprintln(a.stdout, buildinfo.Describe(version, bi))
			return err
		},
	}
}
