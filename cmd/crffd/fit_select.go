package main

import (
	"context"

	"github.com/crffd/crffd/config"
	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/pipeline"
	"github.com/crffd/crffd/plugins/kernels"
	"github.com/crffd/crffd/progress"
	"github.com/crffd/crffd/selection"
)

// choiceSettings reads model.estimator, kernel.name (auto: every installed
// kernel plugin, each parameter value its self-test lists, the Gaussian
// first as the reference), model.validation and model.selection_z
// (config.Reader.Choice).
func (a *app) choiceSettings(ctx context.Context) (config.Choice, error) {
	return a.conf().Choice(func() ([]modelstore.Kernel, error) { return a.kernelSettings(ctx) })
}

// kernelSettings returns the kernels kernel.name asks for
// (config.Reader.Kernels), asking each installed kernel plugin for its
// parameters with kernel.name auto.
func (a *app) kernelSettings(ctx context.Context) ([]modelstore.Kernel, error) {
	return a.conf().Kernels(func(dir, name string) (kernels.Info, error) {
		k, err := a.openKernelCtx(ctx, dir, name, nil)
		if err != nil {
			return kernels.Info{}, err
		}
		defer k.Close()
		return k.Info(), nil
	})
}

// openKernels opens the plugin of each of ks, by kernelLabel. Grid points
// of one kernel share its plugin: one process.
func (a *app) openKernels(ctx context.Context, ks []modelstore.Kernel) (map[string]estimator.Spectral, error) {
	out := map[string]estimator.Spectral{}
	for _, k := range ks {
		base := modelstore.Kernel{Name: k.Name, Params: k.Params}
		sp, ok := out[kernelLabel(base)]
		if !ok {
			var err error
			if sp, err = a.openSpectral(ctx, base); err != nil {
				return nil, err
			}
			out[kernelLabel(base)] = sp
		}
		out[kernelLabel(k)] = sp
	}
	return out, nil
}

// selectionKernels are the kernels ks as model selection's candidates,
// with their plugins in spectra (openKernels).
func selectionKernels(ks []modelstore.Kernel, spectra map[string]estimator.Spectral) []selection.Kernel {
	out := make([]selection.Kernel, len(ks))
	for i, k := range ks {
		out[i] = selection.Kernel{Name: kernelLabel(k), Spectral: spectra[kernelLabel(k)], GridPoint: k.GridPoint}
	}
	return out
}

// kernelLabel names a kernel in candidate names (pipeline.KernelLabel).
func kernelLabel(k modelstore.Kernel) string { return pipeline.KernelLabel(k) }

// selectModel holds c.Share of the rows out, fits every candidate of c
// on the others, and chooses one on the held-out rows (pipeline.Select).
func (a *app) selectModel(ctx context.Context, c config.Choice, data *estimator.Data, schema estimator.Schema, cfg estimator.Config, bar *progress.Line) (*pipeline.Selected, error) {
	spectra, err := a.openKernels(ctx, c.Kernels)
	if err != nil {
		return nil, err
	}
	return pipeline.Select(ctx, data, schema, cfg, pipeline.Selection{Kinds: c.Kinds, Kernels: c.Kernels,
		Candidates: selectionKernels(c.Kernels, spectra), Share: c.Share, Z: c.Z,
		OnFitted: func(done, total int) { bar.Update("fitting the candidates' kernels", done, total, "kernels") }})
}
