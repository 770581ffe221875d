// Package modelstore keeps a site's fitted model in its SQLite file: the
// site's own effective weights and shared parameters as model state, and
// the run's setup (kernel, configuration, standardisation, site index) as
// JSON, so that the daemon can score rows added later with exactly the
// trained model, without retraining. Neither holds any row value.
package modelstore

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/selection"
	"github.com/crffd/crffd/store"
)

// Kernel names the kernel plugin and its parameters, and the point of the
// model-selection grid its model was fitted at, whose D and γ, when set,
// replace those of Setup.Config.
type Kernel struct {
	Name   string             `json:"name"`
	Params map[string]float64 `json:"params,omitempty"`
	selection.GridPoint
}

// Setup is what a site needs, besides its weights, to rebuild its model.
type Setup struct {
	Kernel Kernel           `json:"kernel"`
	Config estimator.Config `json:"config"`
	Scaler estimator.Scaler `json:"scaler"`
	Schema estimator.Schema `json:"schema"`
	Site   int              `json:"site"`  // the site's index in its federation
	Sites  int              `json:"sites"` // the number of sites trained together
	Rounds map[string]int   `json:"rounds"`
	// Calibration corrects the model's CATEs and gives their intervals
	// (inference.Calibration), for rows scored later too; nil for a model
	// saved before it existed or fitted on too few rows for one.
	Calibration *inference.CalibrationParams `json:"calibration,omitempty"`
	// Nuisance is the super learner's GLM learner and weights, with which
	// rows scored later get their AIPW scores as the run's rows did
	// (estimator.Model.StackNuisance); nil for a model saved before it
	// existed, or whose scores came from its own models alone.
	Nuisance *estimator.NuisanceStack `json:"nuisance,omitempty"`
	// Estimator is the candidate model selection chose, whose CATE the
	// model gives (selection.Estimator); nil, as for models saved before
	// selection existed, means the latent CATE.
	Estimator *selection.Estimator `json:"estimator,omitempty"`
	// Extra are the kernels of the further models an ensemble's members
	// need: an Estimator member of kernel j ≥ 1 uses the model of
	// Extra[j−1], whose states are saved as "<model>.<j>" (latent.1), and
	// kernel 0 the model of Kernel.
	Extra []Kernel `json:"extra_kernels,omitempty"`
}

// stateName is the crff_model name of model kind k of the run's model j
// (0: the model of Setup.Kernel).
func stateName(k estimator.Kind, j int) string {
	if j == 0 {
		return k.String()
	}
	return fmt.Sprintf("%s.%d", k, j)
}

// Save stores site s's part of m under run: the setup and one model state
// per fitted model, named after estimator.Kind; and the same of extra, the
// models of setup.Extra's kernels, one each.
func Save(ctx context.Context, db *store.Site, run string, setup Setup, m *estimator.Model, extra ...*estimator.Model) error {
	if len(extra) != len(setup.Extra) {
		return fmt.Errorf("save model of run %q: %d extra models for %d extra kernels", run, len(extra), len(setup.Extra))
	}
	setup.Rounds = map[string]int{}
	for j, m := range append([]*estimator.Model{m}, extra...) {
		for _, k := range estimator.Kinds {
			t := m.Trained(k)
			own, err := t.Own(setup.Site)
			if err != nil {
				return fmt.Errorf("save model of run %q: %w", run, err)
			}
			setup.Rounds[stateName(k, j)] = t.Rounds
			if err := db.SaveModel(ctx, store.ModelState{Run: run, Model: stateName(k, j), Round: t.Rounds, Tensors: tensors(own)}); err != nil {
				return err
			}
		}
	}
	js, err := json.Marshal(setup)
	if err != nil {
		return fmt.Errorf("save setup of run %q: %w", run, err)
	}
	return db.SaveSetup(ctx, run, js)
}

// tensors flattens weights and shared parameters, in name order, as
// "w.<block>" and "s.<param>".
func tensors(sw estimator.SiteWeights) []store.Tensor {
	var out []store.Tensor
	for _, name := range sortedKeys(sw.Weights) {
		w := sw.Weights[name]
		r, c := w.Dims()
		out = append(out, store.Tensor{Name: "w." + name, Shape: []int{r, c}, Values: mat.DenseCopyOf(w).RawMatrix().Data})
	}
	for _, name := range sortedKeys(sw.Shared) {
		v := sw.Shared[name]
		out = append(out, store.Tensor{Name: "s." + name, Shape: []int{len(v)}, Values: append([]float64(nil), v...)})
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// SpectralFunc opens the kernel a setup names.
type SpectralFunc func(ctx context.Context, k Kernel) (estimator.Spectral, error)

// Load rebuilds the model of run from db. open supplies the kernel, whose
// frequencies are drawn again from the saved seed.
func Load(ctx context.Context, db *store.Site, run string, open SpectralFunc) (*estimator.Model, Setup, error) {
	var setup Setup
	r, err := db.LookupRun(ctx, run)
	if err != nil {
		return nil, setup, err
	}
	if r.Setup == nil {
		return nil, setup, fmt.Errorf("load model of run %q from %q: %w: no setup saved", run, db.Path(), store.ErrNoModel)
	}
	if err := json.Unmarshal(r.Setup, &setup); err != nil {
		return nil, setup, fmt.Errorf("load model of run %q from %q: %w: setup: %w", run, db.Path(), store.ErrCorrupt, err)
	}
	m, err := load(ctx, db, run, setup, setup.Kernel, 0, open)
	return m, setup, err
}

// LoadAll is Load that rebuilds the models of setup.Extra too: models[0]
// is Load's, models[j] that of Extra[j−1], as the Estimator's members
// number them (selection.Estimator.CATEModels).
func LoadAll(ctx context.Context, db *store.Site, run string, open SpectralFunc) ([]*estimator.Model, Setup, error) {
	m, setup, err := Load(ctx, db, run, open)
	if err != nil {
		return nil, setup, err
	}
	models := []*estimator.Model{m}
	for j, k := range setup.Extra {
		m, err := load(ctx, db, run, setup, k, j+1, open)
		if err != nil {
			return nil, setup, err
		}
		models = append(models, m)
	}
	return models, setup, nil
}

// load rebuilds the run's model j, of kernel k.
func load(ctx context.Context, db *store.Site, run string, setup Setup, kernel Kernel, j int, open SpectralFunc) (*estimator.Model, error) {
	own := map[estimator.Kind]estimator.SiteWeights{}
	for _, k := range estimator.Kinds {
		ms, err := db.LoadModel(ctx, run, stateName(k, j))
		if err != nil {
			return nil, err
		}
		sw := estimator.SiteWeights{Weights: map[string]*mat.Dense{}, Shared: map[string][]float64{}}
		for _, t := range ms.Tensors {
			switch {
			case len(t.Name) > 2 && t.Name[:2] == "w." && len(t.Shape) == 2:
				sw.Weights[t.Name[2:]] = mat.NewDense(t.Shape[0], t.Shape[1], t.Values)
			case len(t.Name) > 2 && t.Name[:2] == "s.":
				sw.Shared[t.Name[2:]] = t.Values
			default:
				return nil, fmt.Errorf("load model of run %q from %q: %w: tensor %q of shape %v", run, db.Path(), store.ErrCorrupt, t.Name, t.Shape)
			}
		}
		own[k] = sw
	}
	spectral, err := open(ctx, kernel)
	if err != nil {
		return nil, err
	}
	es, err := estimator.NewSetup(ctx, setup.Schema, spectral, kernel.Config(setup.Config), setup.Scaler)
	if err != nil {
		return nil, err
	}
	m, err := estimator.NewSiteModel(es, setup.Site, own)
	if err != nil {
		return nil, fmt.Errorf("load model of run %q from %q: %w", run, db.Path(), err)
	}
	return m, nil
}
