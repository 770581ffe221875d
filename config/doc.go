// Package config is crffd's settings table and its typed reading.
//
// Contract:
//   - Settings lists every configuration key crffd reads, each with its
//     default and help text; EnvName gives its environment variable. The
//     table is the single source of the defaults (NewViper), the check for
//     unknown keys in a file (CheckKeys), `crffd config show` (Effective)
//     and the reference in docs/configuration.md (Reference).
//   - A Reader turns a *viper.Viper, layered as defaults, file, environment
//     and flags, into the typed structs the library packages take: the
//     records source (store.Source), the model (estimator.Config), the
//     kernels (modelstore.Kernel), a site's limits and privacy
//     (federation.Limits, federation.SitePrivacy), the transport
//     (transport.Config), the model choice (Choice) and the daemons'
//     configurations (coordinatord.Config, site.Config), less what is not
//     a setting (loggers, open plugins, connections, hooks). Relative
//     paths are resolved against the configuration file's folder.
//   - The options of the commands that take flags rather than keys (crffd
//     eval, simulate, import, certs) are parsed here too: EvalOptions,
//     SimulateOptions, ParseDelimiter, CertRequest.
//   - Each reader returns an error naming the key or flag and the value it
//     refuses. Nothing here starts a plugin or opens a socket; the readers
//     touch the file system only to list the plugin folder (Kernels) and
//     to see that a named revocation list exists (CheckCRL).
//
// Viper is the configuration library; binding command-line flags to keys is
// the command's business.
package config
