package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/certs"
)

func newCertsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Make the federation CA and the certificates of sites and the coordinator",
		Long: `Daemons of a federation authenticate each other with mutual TLS. certs init
makes a federation CA (ca.crt, ca.key) in --dir; certs issue NAME makes
NAME.crt and NAME.key signed by it, whose name is the daemon's identity in
every envelope it sends. Copy ca.crt, NAME.crt and NAME.key to the daemon
NAME; ca.key stays with whoever runs the CA. Existing files are never
overwritten, except by certs issue NAME --renew, which replaces NAME.crt and
NAME.key; a running daemon picks up the new files within seconds, without a
restart.`,
	}
	var dir string
	cmd.PersistentFlags().StringVar(&dir, "dir", "certs", "folder of the federation CA")
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Create the federation CA",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ca, err := certs.InitCA(dir)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "federation CA: %s (key %s, keep it private), valid until %s\n",
				ca.CertFile, ca.KeyFile, ca.Certificate.NotAfter.Format("2006-01-02"))
			return err
		},
	}
	var out string
	var hosts []string
	var renew bool
	issueCmd := &cobra.Command{
		Use:   "issue NAME",
		Short: "Issue the certificate of a site or the coordinator, or renew it",
		Long: `Issue NAME.crt and NAME.key, signed by the CA in --dir, into --out. Existing
files are never overwritten.

With --renew, NAME.crt must exist: NAME gets a new certificate and key from
the same CA, and each file is replaced atomically (written beside the old one,
synced, renamed over it). Without --host the new certificate keeps the host
names of the old one. A daemon using the files, site or coordinator, loads
them within seconds without a restart, and keeps the old certificate (logging
why) if the new files cannot be used. A site reconnects at once with its new
certificate; the coordinator presents its new one to every new connection.`,
		Example: `  crffd certs issue hospital-a --dir ca/ --out hospital-a/
  crffd certs issue hospital-a --dir ca/ --out hospital-a/ --renew   # before it expires`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				out = dir
			}
			issue, verb := certs.Issue, "issued"
			if renew {
				issue, verb = certs.Renew, "renewed"
				if !cmd.Flags().Changed("host") {
					hosts = nil // keep the old certificate's
				}
			}
			c, err := issue(dir, args[0], out, hosts)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "%s: %s %s and %s, signed by %s, valid until %s\n", args[0], verb, c.CertFile, c.KeyFile,
				filepath.Join(dir, certs.CACertFile), c.Certificate.NotAfter.Format("2006-01-02"))
			return err
		},
	}
	issueCmd.Flags().StringVar(&out, "out", "", "folder for NAME.crt and NAME.key (default: --dir)")
	issueCmd.Flags().StringSliceVar(&hosts, "host", []string{"localhost", "127.0.0.1"}, "host names and addresses the certificate is valid for (the coordinator's listening address); with --renew, default: the old certificate's")
	issueCmd.Flags().BoolVar(&renew, "renew", false, "replace the existing NAME.crt and NAME.key with a new certificate and key from the same CA")
	cmd.AddCommand(initCmd, issueCmd)
	return cmd
}
