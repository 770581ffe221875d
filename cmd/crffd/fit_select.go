package main

import (
	"context"

	"github.com/crffd/crffd/config"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/plugins/kernels"
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
