package kit

import (
	"fmt"
	"strings"
)

// siteReadme is the README of the site s's kit.
func siteReadme(s Site, coord string) string {
	return fmt.Sprintf(`# Start-up kit of site %[1]s

This folder lets the crffd daemon of site %[1]s join its federation: the
coordinator %[2]s at %[3]s.

- certs/%[1]s.crt and certs/%[1]s.key: the site's certificate and private
  key. The key is the site's identity: keep it readable by the crffd user
  alone (mode 0600), and never copy it elsewhere.
- certs/ca.crt (and certs/ca.crl, when there is one): the federation's
  certificate authority and its revocation list.
- %[1]s.yaml: the site's configuration.

Before the first run:

1. Check the kit: crffd kit verify %[1]s.tar.gz
2. Unpack it where the daemon runs; with the Debian package,
   /etc/crffd/sites/ (the configuration at /etc/crffd/sites/%[1]s.yaml, the
   certificates beside it in certs/), owned by root and readable by the
   crffd group.
3. In %[1]s.yaml, set every value that begins with %[4]s: the SQLite
   file (under /var/lib/crffd with the package), the table of records and
   its id, treatment and outcome columns. crffd kit verify lists what is
   left to set.
4. Agree the federation secret with the other sites, never with the
   coordinator, and set it in the daemon's environment:
   CRFFD_FEDERATION_SECRET (with the package, in
   /etc/crffd/sites/%[1]s.env, mode 0640).
5. Check the records: crffd check --config %[1]s.yaml
6. Start the daemon: systemctl enable --now crffd-site@%[1]s (or
   crffd site --config %[1]s.yaml).

The site dials out to the coordinator; nothing dials in. Rows never leave
the site: see docs/privacy.md and docs/operations.md.
`, s.Name, coord, s.Coordinator, Placeholder)
}

// coordinatorReadme is the README of the coordinator c's kit.
func coordinatorReadme(c Coordinator) string {
	return fmt.Sprintf(`# Start-up kit of the coordinator %[1]s

This folder lets the crffd coordinator %[1]s run its federation of the
sites %[2]s, listening on %[3]s. Its certificate is valid for the
names the sites dial: %[4]s.

- certs/%[1]s.crt and certs/%[1]s.key: the coordinator's certificate and
  private key (mode 0600).
- certs/ca.crt (and certs/ca.crl): the federation's certificate authority
  and its revocation list.
- %[1]s.yaml: the coordinator's configuration; its state database is
  %[1]s.sqlite beside it (with the Debian package, under /var/lib/crffd).

Check the kit (crffd kit verify), unpack it (with the package, into
/etc/crffd, the configuration at /etc/crffd/coordinator.yaml), and start
it: systemctl enable --now crffd-coordinator (or crffd coordinator
--config %[1]s.yaml). Each site gets a kit of its own: crffd kit site NAME.
`, c.Name, strings.Join(c.Sites, ", "), c.Address, strings.Join(c.Hosts, ", "))
}
