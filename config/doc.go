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
//     kernel (modelstore.Kernel), a site's limits and privacy
//     (federation.Limits, federation.SitePrivacy), the transport
//     (transport.Config) and the model choice (Choice). Relative paths are
//     resolved against the configuration file's folder.
//   - Each reader returns an error naming the key and the value it refuses;
//     nothing here opens a plugin, a file or a socket.
//
// Viper is the configuration library; binding command-line flags to keys is
// the command's business.
package config
