package main

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/kit"
)

func newKitCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kit",
		Short: "Write and check start-up kits: one archive per site and for the coordinator",
		Long: `A start-up kit brings a daemon of a federation up without copying files by
hand: one archive holding its certificate and key (issued from the CA in
--ca-dir), the CA's certificate and revocation list, a configuration with
every key the federation fixes filled in, and a README. A site's
configuration names what only the hospital can set (its SQLite file, table
and columns) with values beginning SET-ME; the sites' shared secret is never
in a kit. kit verify checks an archive before it is installed.`,
	}
	var caDir string
	var days int
	cmd.PersistentFlags().StringVar(&caDir, "ca-dir", "certs", "folder of the federation CA (crffd certs init)")
	cmd.PersistentFlags().IntVar(&days, "days", 90, "days the kit's certificate is valid")
	validity := func() (time.Duration, error) {
		if days <= 0 {
			return 0, withExit(exitConfig, fmt.Errorf("--days %d: want a positive number of days", days))
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}

	var coordinator, coordName, out string
	site := &cobra.Command{
		Use:     "site NAME",
		Short:   "Write the kit of site NAME: NAME.tar.gz",
		Example: `  crffd kit site hospital-a --ca-dir ca/ --coordinator coord.example.org:7443`,
		Args:    cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			v, err := validity()
			if err != nil {
				return err
			}
			path := cmp.Or(out, args[0]+".tar.gz")
			if err := kit.WriteSite(caDir, path, kit.Site{Name: args[0], Coordinator: coordinator, CoordinatorName: coordName, Validity: v}); err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "kit of site %s: %s (give it to the site; crffd kit verify %s checks it)\n", args[0], path, path)
			return err
		},
	}
	site.Flags().StringVar(&coordinator, "coordinator", "", "HOST:PORT where the site dials the coordinator")
	site.Flags().StringVar(&coordName, "coordinator-name", "coordinator", "the coordinator's federation name")
	site.Flags().StringVar(&out, "out", "", "the archive to write (default NAME.tar.gz)")

	var address, name string
	var sites, hosts []string
	coord := &cobra.Command{
		Use:     "coordinator",
		Short:   "Write the coordinator's kit",
		Example: `  crffd kit coordinator --ca-dir ca/ --address coord.example.org:7443 --sites hospital-a,hospital-b,hospital-c`,
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			v, err := validity()
			if err != nil {
				return err
			}
			path := cmp.Or(out, cmp.Or(name, "coordinator")+".tar.gz")
			if err := kit.WriteCoordinator(caDir, path, kit.Coordinator{Name: name, Address: address, Sites: sites, Hosts: hosts, Validity: v}); err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "kit of the coordinator: %s\n", path)
			return err
		},
	}
	coord.Flags().StringVar(&address, "address", "", "HOST:PORT the coordinator listens on, its host the one sites dial")
	coord.Flags().StringVar(&name, "name", "coordinator", "the coordinator's federation name")
	coord.Flags().StringSliceVar(&sites, "sites", nil, "the sites' names, comma-separated")
	coord.Flags().StringSliceVar(&hosts, "host", nil, "the names and addresses sites dial, for its certificate (default: the host of --address)")
	coord.Flags().StringVar(&out, "out", "", "the archive to write (default NAME.tar.gz)")

	verify := &cobra.Command{
		Use:   "verify ARCHIVE",
		Short: "Check a kit before installing it",
		Long: `verify checks a kit: its files, its certificate (issued by the CA it carries,
not on its revocation list, valid now, for its role, matching its key) and
its configuration (the names and certificate files). It lists the values
the hospital has still to set.`,
		Example: `  crffd kit verify hospital-a.tar.gz`,
		Args:    cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			now := time.Now()
			rep, err := kit.Verify(args[0], now)
			if err != nil {
				return err
			}
			crl := "no revocation list (none issued)"
			if rep.Revocations {
				crl = "the CA's revocation list"
			}
			fmt.Fprintf(a.stdout, "%s: the kit of %s %s, certificate valid until %s (%d days), with %s\n",
				args[0], rep.Role, rep.Name, rep.NotAfter.UTC().Format("2006-01-02"), rep.DaysLeft(now), crl)
			if len(rep.Placeholders) == 0 {
				_, err = fmt.Fprintln(a.stdout, "nothing left to set")
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "to set in %s.yaml before the first run: %s\n", rep.Name, strings.Join(rep.Placeholders, ", "))
			return err
		},
	}
	cmd.AddCommand(site, coord, verify)
	return cmd
}
