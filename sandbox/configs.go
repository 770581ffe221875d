package sandbox

import (
	"fmt"
	"maps"
	"slices"

	"github.com/crffd/crffd/synth"
)

// siteConfig returns the ready single-site configuration written beside a
// simulated site file, with the privacy section of bounds. Paths in a
// configuration are relative to the file.
func siteConfig(name, dbFile string, binary bool, bounds map[string]synth.Bound) ([]byte, error) {
	outcome := "continuous"
	if binary {
		outcome = "binary"
	}
	fields := []field{
		{key: "site", value: []field{
			{key: "name", value: name},
			{key: "db", value: dbFile},
			{key: "table", value: RecordsTable},
			{key: "id_column", value: "id"},
			{key: "treatment_column", value: "w"},
			{key: "outcome_column", value: "y"},
			{key: "outcome_type", value: outcome},
			{key: "on_invalid", value: "refuse"},
		}},
		{key: "kernel", value: []field{{key: "name", value: "gaussian"}}},
	}
	if p, ok := privacyBounds(bounds); ok {
		fields = append(fields, p)
	}
	header := fmt.Sprintf("# Site %[1]s, written by crffd simulate. Fit it alone with:\n#   crffd fit --config %[1]s.yaml", name)
	return marshal(header, fields...)
}

// privacyBounds returns the privacy section of a simulated site's
// configuration: the design's public column ranges (synth.Design.Bounds),
// which a private site needs for its moments, and no budget, so that
// adding epsilon under privacy makes the site private. It reports false
// without bounds.
func privacyBounds(bounds map[string]synth.Bound) (field, bool) {
	if len(bounds) == 0 {
		return field{}, false
	}
	var ranges []field
	for _, n := range slices.Sorted(maps.Keys(bounds)) {
		ranges = append(ranges, field{key: n, value: flowPair{bounds[n].Lo, bounds[n].Hi}})
	}
	return field{key: "privacy", value: []field{{key: "bounds", value: ranges}},
		comment: "# Add epsilon (the site's budget) under privacy to make the site private;\n" +
			"# bounds are the simulated design's public column ranges (docs/privacy.md)."}, true
}

// tlsSection is the federation.tls section of the daemon name, whose
// certificates are under certs/NAME.
func tlsSection(name string) field {
	dir := "certs/" + name + "/"
	return field{key: "tls", value: []field{
		{key: "ca", value: dir + "ca.crt"},
		{key: "cert", value: dir + name + ".crt"},
		{key: "key", value: dir + name + ".key"},
	}}
}

// coordinatorConfig returns the configuration of the sandbox federation's
// coordinator of sites, listening on addr with metrics on metrics.
func coordinatorConfig(addr, metrics string, sites []string) ([]byte, error) {
	return marshal("# The coordinator of the sandbox federation, written by crffd simulate.\n#   crffd coordinator --config coordinator.yaml --once",
		field{key: "federation", value: []field{
			{key: "coordinator", value: "coordinator"},
			{key: "address", value: addr},
			{key: "transport", value: "grpc"},
			tlsSection("coordinator"),
			{key: "round_timeout", value: "2m"},
			{key: "retries", value: 3},
			{key: "metrics_address", value: metrics},
		}},
		field{key: "coordinator", value: []field{
			{key: "sites", value: sites},
			{key: "state_db", value: "coordinator.sqlite"},
			{key: "checkpoint_every", value: 1},
		}},
		field{key: "kernel", value: []field{{key: "name", value: "gaussian"}}},
		field{key: "model", value: []field{
			{key: "features", value: 50},
			{key: "latent", value: 5},
			{key: "rounds", value: 100},
		}},
	)
}

// siteFederation returns the federation section of the site name of the
// sandbox federation whose coordinator listens on addr, with the sites'
// shared secret.
func siteFederation(name, addr, secret string) ([]byte, error) {
	return marshal(fmt.Sprintf("# Take part in the sandbox federation with:\n#   crffd site --config %s.yaml --once", name),
		field{key: "federation", value: []field{
			{key: "coordinator", value: "coordinator"},
			{key: "address", value: addr},
			{key: "transport", value: "grpc"},
			{key: "secret", value: secret, comment: "# Shared by the sandbox's sites and never by the coordinator: it keys the\n" +
				"# column fingerprints. A real site would rather set CRFFD_FEDERATION_SECRET."},
			tlsSection(name),
		}},
	)
}
