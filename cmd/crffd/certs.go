package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/certs"
	"github.com/crffd/crffd/config"
)

func newCertsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Make, renew and revoke the certificates of sites and the coordinator",
		Long: `Daemons of a federation authenticate each other with mutual TLS. certs init
makes a federation CA (ca.crt, ca.key) in --dir; certs issue NAME makes
NAME.crt and NAME.key signed by it, whose name is the daemon's identity in
every envelope it sends. Copy ca.crt, NAME.crt and NAME.key to the daemon
NAME; ca.key stays with whoever runs the CA. A site's certificate
authenticates a TLS client only and names no host; the coordinator's
(--role coordinator) authenticates the server sites dial, at the host names
it carries. Certificates are valid for 90 days unless --days says otherwise:
certs renew NAME replaces them, and a running daemon picks up the new files
within seconds, without a restart. certs revoke NAME puts NAME's
certificates on the revocation list ca.crl, which daemons read beside their
ca.crt. Existing files are never overwritten, except by renew and revoke.`,
	}
	var dir string
	cmd.PersistentFlags().StringVar(&dir, "dir", "certs", "folder of the federation CA")
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Create the federation CA",
		Example: `  # once, on a machine the coordinator's operator controls: ca/ca.crt and ca/ca.key (keep ca.key private)
  crffd certs init --dir ca/`,
		Args: cobra.NoArgs,
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
	cmd.AddCommand(initCmd, newCertsSignCmd(a, &dir, false), newCertsSignCmd(a, &dir, true), newCertsRevokeCmd(a, &dir))
	return cmd
}

// newCertsSignCmd returns certs issue, or certs renew.
func newCertsSignCmd(a *app, dir *string, renew bool) *cobra.Command {
	var out, role string
	var hosts []string
	var days int
	c := &cobra.Command{
		Use:   "issue NAME",
		Short: "Issue the certificate of a site or, with --role coordinator, of the coordinator",
		Long: `Issue NAME.crt and NAME.key, signed by the CA in --dir, into --out, with a copy
of ca.crt. Existing files are never overwritten. A site's certificate (the
default) is for TLS client authentication only and names no host. The
coordinator's is for TLS server authentication, valid for the host names
and addresses of --host, which must include the one sites dial
(default: localhost,127.0.0.1).`,
		Example: `  # a site: copy ca.crt, hospital-a.crt and hospital-a.key from hospital-a/ to the site
  crffd certs issue hospital-a --dir ca/ --out hospital-a/

  # the coordinator, at the host name sites dial (federation.tls of coordinator.yaml: ca/coordinator.crt, .key)
  crffd certs issue coordinator --role coordinator --dir ca/ --host coord.example.org

  # a certificate valid for a year instead of 90 days
  crffd certs issue hospital-b --dir ca/ --out hospital-b/ --days 365`,
		Args: cobra.ExactArgs(1),
	}
	if renew {
		c.Use, c.Short = "renew NAME", "Replace a site's or the coordinator's certificate and key before they expire"
		c.Long = `Renew NAME.crt and NAME.key in --out: a new key and certificate from the CA in
--dir, with the role and (for the coordinator) the host names of the old
one unless --role or --host says otherwise. Each file is replaced atomically
(written beside the old one, synced, renamed over it). A daemon using the
files loads them within seconds without a restart, and keeps the old
certificate (logging why) if the new files cannot be used. A site
reconnects at once with its new certificate; the coordinator presents its
new one to every new connection. A certificate from a crffd before roles
existed is valid for both roles: say which with --role.`
		c.Example = `  # before the 90 days are up; then copy hospital-a.crt and hospital-a.key to the site
  crffd certs renew hospital-a --dir ca/ --out hospital-a/

  # the coordinator, adding a host name sites may dial
  crffd certs renew coordinator --dir ca/ --host coord.example.org,coord2.example.org`
	}
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if out == "" {
			out = *dir
		}
		return signCert(a.stdout, *dir, out, args[0], role, hosts, cmd.Flags().Changed("host"), days, renew)
	}
	c.Flags().StringVar(&out, "out", "", "folder of NAME.crt and NAME.key (default: --dir)")
	c.Flags().StringVar(&role, "role", "", "site (TLS client only, no host) or coordinator (TLS server at --host); default: site, or for renew the old certificate's")
	c.Flags().StringSliceVar(&hosts, "host", nil, "coordinator only: the host names and addresses sites dial (default: localhost,127.0.0.1; for renew, the old certificate's)")
	c.Flags().IntVar(&days, "days", 0, fmt.Sprintf("days the certificate is valid (default %d, and never past the CA's expiry)", int(certs.CertValidity/(24*time.Hour))))
	return c
}

// signCert issues, or with renew renews, the certificate of name from the
// CA in dir into out, as --role, --host (hostsSet when given) and --days
// ask, and says so on w.
func signCert(w io.Writer, dir, out, name, role string, hosts []string, hostsSet bool, days int, renew bool) error {
	req, err := config.CertRequest(name, role, hosts, hostsSet, days, renew)
	if err != nil {
		return err
	}
	sign, verb := certs.Issue, "issued"
	if renew {
		sign, verb = certs.Renew, "renewed"
	}
	is, err := sign(dir, out, req)
	if err != nil {
		return err
	}
	what := "a site's: client authentication, no host"
	if certs.RoleOf(is.Certificate) == certs.RoleCoordinator {
		what = "the coordinator's, for " + strings.Join(certs.Hosts(is.Certificate), ", ")
	}
	_, err = fmt.Fprintf(w, "%s: %s %s and %s (%s), signed by %s, valid until %s\n", name, verb, is.CertFile, is.KeyFile, what,
		filepath.Join(dir, certs.CACertFile), is.Certificate.NotAfter.Format("2006-01-02"))
	return err
}

func newCertsRevokeCmd(a *app, dir *string) *cobra.Command {
	var files []string
	c := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke every certificate issued to a site or the coordinator",
		Long: `Put every certificate the CA in --dir issued to NAME on the revocation list
ca.crl in --dir, signed by the CA, keeping what it held. Copy ca.crl beside
ca.crt at every daemon (or where federation.tls.crl points): a running daemon
reads it within seconds, refuses new connections that present a revoked
certificate, and the coordinator closes the revoked sites' open ones.
Certificates issued by a crffd before the CA kept copies are revoked by
naming their files with --cert. To let NAME back in, issue it a new
certificate (certs renew).`,
		Example: `  # then copy ca/ca.crl beside ca.crt at every daemon (or to federation.tls.crl)
  crffd certs revoke hospital-b --dir ca/

  # also a certificate issued before the CA kept copies
  crffd certs revoke hospital-b --dir ca/ --cert hospital-b/hospital-b.crt`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			rev, err := certs.Revoke(*dir, args[0], files)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "%s: %d certificate(s) revoked (serial %s); %s lists %d in all: copy it beside ca.crt at every daemon\n",
				args[0], len(rev.Serials), rev.SerialsText(), rev.File, rev.Entries)
			return err
		},
	}
	c.Flags().StringSliceVar(&files, "cert", nil, "certificate files of NAME to revoke besides those the CA has copies of")
	return c
}
