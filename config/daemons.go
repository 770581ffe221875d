package config

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/crffd/crffd/coordinatord"
	"github.com/crffd/crffd/daemon/site"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/store"
)

// Coordinator returns the coordinator daemon's configuration from the
// coordinator.*, federation.* and model.* keys, its run's template
// included. The caller adds what is not a setting: the run's logger,
// metrics, kernels and model selection, the state file, the connection
// and the hooks.
func (r Reader) Coordinator(once bool) (coordinatord.Config, error) {
	c := coordinatord.Config{Once: once}
	sites := r.StringList("coordinator.sites")
	if len(sites) == 0 {
		return c, errors.New("coordinator.sites is empty: list the sites' federation names")
	}
	if err := federation.CheckSites(sites); err != nil {
		return c, fmt.Errorf("coordinator.sites: %w", err)
	}
	run := federation.CoordinatorConfig{Name: r.V.GetString("federation.coordinator"), Sites: sites}
	var err error
	if run.Config, err = r.Model(); err != nil {
		return c, err
	}
	if run.RoundTimeout, err = r.PositiveDuration("federation.round_timeout"); err != nil {
		return c, err
	}
	if c.RetryAfter, err = r.PositiveDuration("coordinator.retry_after"); err != nil {
		return c, err
	}
	run.Retries, run.CheckpointEvery = r.V.GetInt("federation.retries"), r.V.GetInt("coordinator.checkpoint_every")
	if run.Retries < 0 || run.CheckpointEvery < 0 {
		return c, fmt.Errorf("federation.retries %d, coordinator.checkpoint_every %d: want ≥ 0 and ≥ 0", run.Retries, run.CheckpointEvery)
	}
	if c.MinSites = r.V.GetInt("coordinator.min_sites"); c.MinSites < 0 || c.MinSites > len(sites) {
		return c, fmt.Errorf("coordinator.min_sites %d: want 0 (every site) to the %d sites listed", c.MinSites, len(sites))
	}
	if run.CheckpointInterval, err = r.Duration("coordinator.checkpoint_interval"); err != nil {
		return c, err
	}
	if err := r.V.UnmarshalKey("coordinator.subgroups", &run.Subgroups); err != nil {
		return c, fmt.Errorf("coordinator.subgroups: a list of {name, predicate}: %w", err)
	}
	if err := federation.CheckSubgroups(run.Subgroups); err != nil {
		return c, fmt.Errorf("coordinator.%w", err)
	}
	c.RunEvery, err = r.Duration("coordinator.run_every")
	c.Run = run
	return c, err
}

// FederatedSite returns the configuration of a federated site daemon
// reading the records src: site.name, site.poll_interval, and the
// federation.*, limits.*, privacy.* and kernel.name settings. It warns on
// log when federation.secret is not set. The caller adds what is not a
// setting: the site file, the logger, the kernels, the connection, the
// metrics and the hooks.
func (r Reader) FederatedSite(src store.Source, log *slog.Logger) (site.Config, error) {
	name := r.V.GetString("site.name")
	if err := wire.CheckName(name); err != nil {
		return site.Config{}, fmt.Errorf("site.name: %w", err)
	}
	minArm := r.V.GetInt("federation.min_arm_rows")
	if minArm < 1 {
		return site.Config{}, fmt.Errorf("federation.min_arm_rows %d: want at least 1", minArm)
	}
	every, err := r.PositiveDuration("site.poll_interval")
	if err != nil {
		return site.Config{}, err
	}
	secret := r.V.GetString("federation.secret")
	if secret != "" {
		if err := CheckSecret(secret); err != nil {
			return site.Config{}, err
		}
	} else {
		log.Warn("federation.secret is not set: column names are fingerprinted with unkeyed SHA-256, which the coordinator can test guessed names against")
	}
	limits, err := r.Limits()
	if err != nil {
		return site.Config{}, err
	}
	priv, err := r.Privacy()
	if err != nil {
		return site.Config{}, err
	}
	groups, err := r.SubgroupPolicy()
	if err != nil {
		return site.Config{}, err
	}
	thresholds, err := r.PolicyThresholds()
	if err != nil {
		return site.Config{}, err
	}
	f := &site.Federation{Name: name, Coordinator: r.V.GetString("federation.coordinator"), Secret: []byte(secret),
		MinArmRows: minArm, Limits: limits, Privacy: priv, Subgroups: groups, PolicyThresholds: thresholds,
		// With kernel.name auto the site trains any installed kernel a
		// run names, the Gaussian when it names none; otherwise its one
		// kernel alone.
		AnyKernel: r.V.GetString("kernel.name") == "auto",
	}
	return site.Config{Source: src, PollInterval: every, Federation: f}, nil
}

// SubgroupPolicy returns site.subgroups: deny (none), allow (any of the
// coordinator's subgroups) or a list of their names.
func (r Reader) SubgroupPolicy() (federation.SubgroupPolicy, error) {
	v := r.StringList("site.subgroups")
	switch {
	case len(v) == 0 || (len(v) == 1 && v[0] == "deny"):
		return federation.SubgroupPolicy{}, nil
	case len(v) == 1 && v[0] == "allow":
		return federation.SubgroupPolicy{Any: true}, nil
	}
	for _, name := range v {
		if name == "allow" || name == "deny" {
			return federation.SubgroupPolicy{}, fmt.Errorf("site.subgroups %v: deny, allow, or a list of subgroup names, not %q among names", v, name)
		}
	}
	return federation.SubgroupPolicy{Names: v}, nil
}
