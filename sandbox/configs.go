package sandbox

import (
	"fmt"
	"maps"
	"slices"

	"github.com/crffd/crffd/internal/yamlout"
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
	fields := []yamlout.Field{
		{Key: "site", Value: []yamlout.Field{
			{Key: "name", Value: name},
			{Key: "db", Value: dbFile},
			{Key: "table", Value: RecordsTable},
			{Key: "id_column", Value: "id"},
			{Key: "treatment_column", Value: "w"},
			{Key: "outcome_column", Value: "y"},
			{Key: "outcome_type", Value: outcome},
			{Key: "on_invalid", Value: "refuse"},
		}},
		{Key: "kernel", Value: []yamlout.Field{{Key: "name", Value: "gaussian"}}},
	}
	if p, ok := privacyBounds(bounds); ok {
		fields = append(fields, p)
	}
	header := fmt.Sprintf("# Site %[1]s, written by crffd simulate. Fit it alone with:\n#   crffd fit --config %[1]s.yaml", name)
	return yamlout.Marshal(header, fields...)
}

// privacyBounds returns the privacy section of a simulated site's
// configuration: the design's public column ranges (synth.Design.Bounds),
// which a private site needs for its moments, and no budget, so that
// adding epsilon under privacy makes the site private. It reports false
// without bounds.
func privacyBounds(bounds map[string]synth.Bound) (yamlout.Field, bool) {
	if len(bounds) == 0 {
		return yamlout.Field{}, false
	}
	var ranges []yamlout.Field
	for _, n := range slices.Sorted(maps.Keys(bounds)) {
		ranges = append(ranges, yamlout.Field{Key: n, Value: yamlout.FlowPair{bounds[n].Lo, bounds[n].Hi}})
	}
	return yamlout.Field{Key: "privacy", Value: []yamlout.Field{{Key: "bounds", Value: ranges}},
		Comment: "# Add epsilon (the site's budget) under privacy to make the site private;\n" +
			"# bounds are the simulated design's public column ranges (docs/privacy.md)."}, true
}

// tlsSection is the federation.tls section of the daemon name, whose
// certificates are under certs/NAME.
func tlsSection(name string) yamlout.Field {
	dir := "certs/" + name + "/"
	return yamlout.Field{Key: "tls", Value: []yamlout.Field{
		{Key: "ca", Value: dir + "ca.crt"},
		{Key: "cert", Value: dir + name + ".crt"},
		{Key: "key", Value: dir + name + ".key"},
	}}
}

// coordinatorConfig returns the configuration of the sandbox federation's
// coordinator of sites, listening on addr with metrics on metrics.
func coordinatorConfig(addr, metrics string, sites []string) ([]byte, error) {
	return yamlout.Marshal("# The coordinator of the sandbox federation, written by crffd simulate.\n#   crffd coordinator --config coordinator.yaml --once",
		yamlout.Field{Key: "federation", Value: []yamlout.Field{
			{Key: "coordinator", Value: "coordinator"},
			{Key: "address", Value: addr},
			{Key: "transport", Value: "grpc"},
			tlsSection("coordinator"),
			{Key: "round_timeout", Value: "2m"},
			{Key: "retries", Value: 3},
			{Key: "metrics_address", Value: metrics},
		}},
		yamlout.Field{Key: "coordinator", Value: []yamlout.Field{
			{Key: "sites", Value: sites},
			{Key: "state_db", Value: "coordinator.sqlite"},
			{Key: "checkpoint_every", Value: 1},
		}},
		yamlout.Field{Key: "kernel", Value: []yamlout.Field{{Key: "name", Value: "gaussian"}}},
		yamlout.Field{Key: "model", Value: []yamlout.Field{
			{Key: "features", Value: 50},
			{Key: "latent", Value: 5},
			{Key: "rounds", Value: 100},
		}},
	)
}

// siteFederation returns the federation section of the site name of the
// sandbox federation whose coordinator listens on addr, with the sites'
// shared secret.
func siteFederation(name, addr, secret string) ([]byte, error) {
	return yamlout.Marshal(fmt.Sprintf("# Take part in the sandbox federation with:\n#   crffd site --config %s.yaml --once", name),
		yamlout.Field{Key: "federation", Value: []yamlout.Field{
			{Key: "coordinator", Value: "coordinator"},
			{Key: "address", Value: addr},
			{Key: "transport", Value: "grpc"},
			{Key: "secret", Value: secret, Comment: "# Shared by the sandbox's sites and never by the coordinator: it keys the\n" +
				"# column fingerprints. A real site would rather set CRFFD_FEDERATION_SECRET."},
			tlsSection(name),
		}},
	)
}
