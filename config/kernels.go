package config

import (
	"fmt"
	"slices"

	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/plugins/host"
	"github.com/crffd/crffd/plugins/kernels"
)

// PluginDir returns plugin_dir, or when it is empty the default, the
// folder of the running executable.
func (r Reader) PluginDir() (string, error) {
	if d := r.V.GetString("plugin_dir"); d != "" {
		return d, nil
	}
	return host.DefaultDir()
}

// Kernels returns the kernels kernel.name asks for: the one it names,
// with kernel.params, or for auto every installed kernel plugin in
// PluginDir, at each parameter value its self-test lists (info returns a
// plugin's), the Gaussian first as the reference.
func (r Reader) Kernels(info func(dir, name string) (kernels.Info, error)) ([]modelstore.Kernel, error) {
	if r.V.GetString("kernel.name") != "auto" {
		k, err := r.Kernel()
		return []modelstore.Kernel{k}, err
	}
	dir, err := r.PluginDir()
	if err != nil {
		return nil, err
	}
	bins, err := host.List(dir, kernels.Kind)
	if err != nil {
		return nil, err
	}
	if len(bins) == 0 {
		return nil, fmt.Errorf("kernel.name auto: no kernel plugins (crff-kernel-*) in %q: %w", dir, host.ErrNotFound)
	}
	// The Gaussian, the default kernel, is the reference: first.
	if i := slices.IndexFunc(bins, func(b host.Binary) bool { return b.Name == "gaussian" }); i > 0 {
		bins = append(append([]host.Binary{bins[i]}, bins[:i]...), bins[i+1:]...)
	}
	var out []modelstore.Kernel
	for _, b := range bins {
		in, err := info(dir, b.Name)
		if err != nil {
			return nil, err
		}
		added := false
		for _, p := range in.Params {
			for _, v := range p.Values {
				out = append(out, modelstore.Kernel{Name: b.Name, Params: map[string]float64{p.Name: v}})
				added = true
			}
		}
		if !added {
			out = append(out, modelstore.Kernel{Name: b.Name, Params: map[string]float64{}})
		}
	}
	return out, nil
}
