package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/pipeline"
	"github.com/crffd/crffd/plugins/host"
	"github.com/crffd/crffd/plugins/kernels"
	"github.com/crffd/crffd/progress"
	"github.com/crffd/crffd/selection"
)

// estimatorNames are the values of model.estimator.
var estimatorNames = []string{"auto", selection.KindLatent, selection.KindOutcome, selection.KindTLearner, selection.KindDR}

// choice is what model.estimator, kernel.name and model.validation ask
// for: the candidate kinds and kernels to choose among, and the share of
// rows held out to choose on.
type choice struct {
	kinds   []string // empty: every kind
	kernels []modelstore.Kernel
	share   float64
	z       float64
}

// single reports whether the choice leaves one candidate, which needs no
// held-out rows: the latent or outcome CATE of one kernel.
func (c choice) single() bool {
	return len(c.kernels) == 1 && len(c.kinds) == 1 && (c.kinds[0] == selection.KindLatent || c.kinds[0] == selection.KindOutcome)
}

// choiceSettings reads model.estimator, kernel.name (auto: every installed
// kernel plugin, each parameter value its self-test lists, the Gaussian
// first as the reference), model.validation and model.selection_z.
func (a *app) choiceSettings(ctx context.Context) (choice, error) {
	c := choice{share: a.v.GetFloat64("model.validation"), z: a.v.GetFloat64("model.selection_z")}
	switch est := a.v.GetString("model.estimator"); {
	case est == "auto":
	case slices.Contains(estimatorNames, est):
		c.kinds = []string{est}
	default:
		return c, fmt.Errorf("model.estimator %q: want one of %s", est, strings.Join(estimatorNames, ", "))
	}
	if !(c.share > 0 && c.share < 1) {
		return c, fmt.Errorf("model.validation %v: want a share of the rows in (0, 1)", c.share)
	}
	if !(c.z >= 0) {
		return c, fmt.Errorf("model.selection_z %v: want a number of standard errors ≥ 0", c.z)
	}
	var err error
	if c.kernels, err = a.kernelSettings(ctx); err != nil {
		return c, err
	}
	grid, err := a.gridSettings()
	for _, g := range grid {
		k := c.kernels[0]
		k.GridPoint = g
		c.kernels = append(c.kernels, k)
	}
	return c, err
}

// gridSettings reads kernel.grid: points of D and γ, each NAME=VALUE
// fields joined by ':' (parseGridPoint).
func (a *app) gridSettings() ([]selection.GridPoint, error) {
	var out []selection.GridPoint
	for _, item := range a.stringList("kernel.grid") {
		var fields []string
		if strings.TrimSpace(item) != "" {
			fields = strings.Split(item, ":")
		}
		g, rest, err := parseGridPoint(fields)
		switch {
		case err != nil:
			return nil, fmt.Errorf("kernel.grid %q: %w", item, err)
		case len(rest) > 0:
			return nil, fmt.Errorf("kernel.grid %q: %q is not features=N or linear=G", item, rest[0])
		case g == selection.GridPoint{}:
			return nil, fmt.Errorf("kernel.grid %q: a point sets features=N, linear=G or both", item)
		}
		out = append(out, g)
	}
	return out, nil
}

// kernelSettings returns the kernels kernel.name asks for: the one it
// names, with kernel.params, or for auto every installed kernel plugin,
// at each parameter value its self-test lists, the Gaussian first as the
// reference.
func (a *app) kernelSettings(ctx context.Context) ([]modelstore.Kernel, error) {
	if a.v.GetString("kernel.name") != "auto" {
		k, err := a.kernelRef()
		return []modelstore.Kernel{k}, err
	}
	dir, err := a.pluginDir()
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
		k, err := a.openKernelCtx(ctx, dir, b.Name, nil)
		if err != nil {
			return nil, err
		}
		info := k.Info()
		k.Close()
		added := false
		for _, p := range info.Params {
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

// parseGridPoint takes the grid settings features=N and linear=G out of
// the NAME=VALUE fields of a kernel item and returns them, and the other
// fields, the kernel's own parameters.
func parseGridPoint(fields []string) (selection.GridPoint, []string, error) {
	var k selection.GridPoint
	var rest []string
	for _, f := range fields {
		name, val, _ := strings.Cut(f, "=")
		switch name {
		case "features":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 {
				return k, nil, fmt.Errorf("features=%q: want a whole number of random frequencies ≥ 1", val)
			}
			k.Features = n
		case "linear":
			g, err := strconv.ParseFloat(val, 64)
			if err != nil || !(g >= 0) || math.IsInf(g, 0) {
				return k, nil, fmt.Errorf("linear=%q: want a weight γ ≥ 0", val)
			}
			k.Linear = &g
		default:
			rest = append(rest, f)
		}
	}
	return k, rest, nil
}

// selectModel holds c.share of the rows out, fits every candidate of c
// on the others, and chooses one on the held-out rows (pipeline.Select).
func (a *app) selectModel(ctx context.Context, c choice, data *estimator.Data, schema estimator.Schema, cfg estimator.Config, bar *progress.Line) (*pipeline.Selected, error) {
	spectra, err := a.openKernels(ctx, c.kernels)
	if err != nil {
		return nil, err
	}
	return pipeline.Select(ctx, data, schema, cfg, pipeline.Selection{Kinds: c.kinds, Kernels: c.kernels,
		Candidates: selectionKernels(c.kernels, spectra), Share: c.share, Z: c.z,
		OnFitted: func(done, total int) { bar.Update("fitting the candidates' kernels", done, total, "kernels") }})
}

// printSelection prints which of cands (the first the reference) won,
// chosen on n held-out rows with threshold z (NaN when not known: a
// federated site's), by how much, and the ensemble's shifts, one per site
// (one for a site alone): the chosen candidate is the ensemble of package
// selection.
func printSelection(w io.Writer, cands []selection.Candidate, chosen, n int, z float64, shifts []float64) error {
	ref, won := cands[0], cands[chosen]
	var members []string
	for _, c := range cands {
		if c.Member {
			members = append(members, c.Name)
		}
	}
	within := "the candidates the held-out rows cannot tell from the best"
	if !math.IsNaN(z) {
		within = fmt.Sprintf("the candidates within %.3g standard errors of the best", z)
	}
	shifted := "shifted by %s towards the doubly robust ATE"
	if len(shifts) > 1 {
		shifted = "shifted towards each site's doubly robust ATE, by %s"
	}
	by := make([]string, len(shifts))
	for s, v := range shifts {
		by[s] = fmt.Sprintf("%+.4g", v)
	}
	_, err := fmt.Fprintf(w, "model selection: the mean of %d of %d candidates on %d held-out rows (%s): %s\n"+
		"  doubly robust loss %.4g against the reference %s's %.4g (difference %+.4g); "+shifted+"\n",
		len(members), len(cands)-1, n, within, strings.Join(members, ", "), won.Loss, ref.Name, ref.Loss, won.Diff, strings.Join(by, ", "))
	return err
}

// federatedSelection is the model selection the coordinator asks of a
// run from the choice c of model.estimator, model.validation,
// model.selection_z and kernel.name: none for the latent CATE of one
// kernel alone, and otherwise the candidates of c's kinds, chosen on the
// held-out share of each site's rows. Its kernel is c's first (the
// Gaussian, with kernel.name auto); c's others are the run's further
// kernels (federation.CoordinatorConfig.Extra), whose models every site
// trains too.
func federatedSelection(c choice) (federation.Selection, error) {
	for _, k := range c.kernels {
		if k.GridPoint != (selection.GridPoint{}) {
			return federation.Selection{}, errors.New("kernel.grid runs in crffd fit only: a federation trains every kernel with the run's model.features and model.linear")
		}
	}
	if len(c.kernels) == 1 && len(c.kinds) == 1 && c.kinds[0] == selection.KindLatent {
		return federation.Selection{}, nil
	}
	return federation.Selection{Share: c.share, Kinds: c.kinds, Z: c.z, Kernel: kernelLabel(c.kernels[0])}, nil
}
