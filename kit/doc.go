// Package kit writes and checks start-up kits: one archive per daemon of a
// federation, holding what its host needs to join, so that no one copies
// certificates or writes a configuration by hand.
//
// An archive is a gzip-compressed tar of one folder, NAME/, holding
//
//	certs/ca.crt    the federation CA's certificate
//	certs/ca.crl    its revocation list, when it has revoked anything
//	certs/NAME.crt  the daemon's certificate, issued for the kit
//	certs/NAME.key  its private key (mode 0600)
//	NAME.yaml       the daemon's configuration
//	README.md       what to do with it
//
// A site's configuration has every key the federation fixes filled in
// (its name, the coordinator's name and address, the transport, the
// certificate files) and names each key only the hospital can set (the
// SQLite file, the table and its columns) with a value that begins with
// Placeholder. The federation secret, which the sites share and the
// coordinator must never see, is not in a kit made by the coordinator's
// operator: the README says how the sites set it. A coordinator's kit
// names its sites and the address it listens on.
//
// Verify checks an archive before it is installed: the layout above, the
// certificate against the CA and its revocation list, its validity now and
// its role, the key against the certificate, and the configuration's
// names against the certificate's; it lists the placeholders left to set.
package kit
