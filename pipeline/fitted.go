package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/plugins/kernels"
	"github.com/crffd/crffd/selection"
	"github.com/crffd/crffd/store"
)

// Fitted is a run's fitted models as a site keeps them: the model of the
// run's own kernel first, then those of the further kernels its
// estimator's members need, each with its kernel, and the estimator that
// turns their predictions into the CATEs crff_cate reports, whose members
// number the models from 0 as modelstore.LoadAll returns them.
type Fitted struct {
	Models    []*estimator.Model
	Kernels   []modelstore.Kernel
	Estimator selection.Estimator
}

// CATE returns the CATEs of f's estimator of the rows of d, which belong
// to site; latent, when not nil, is the first model's latent CATE of the
// rows, already computed.
func (f Fitted) CATE(ctx context.Context, site int, d *estimator.Data, latent []float64) ([]float64, error) {
	return f.Estimator.CATEModels(ctx, f.Models, site, d, latent)
}

// Score returns the effects of the rows of d, which belong to site, under
// f's first model, and their CATEs by f's estimator: what scoring rows
// the run did not train on takes (crffd site's new rows, what-if rows).
func (f Fitted) Score(ctx context.Context, site int, d *estimator.Data) (*estimator.Effects, []float64, error) {
	eff, err := f.Models[0].Effects(ctx, site, d)
	if err != nil {
		return nil, nil, err
	}
	cate, err := f.CATE(ctx, site, d, eff.CATE)
	if err != nil {
		return nil, nil, err
	}
	return eff, cate, nil
}

// KeptModels returns the estimator est as a site keeps it with the model
// of kernel own first: the indices of the further kernels its members
// need (used, increasing, own not among them), and est with its members'
// kernels renumbered to match, own 0 and used[j] j+1, as
// modelstore.LoadAll numbers the models. An estimator other than an
// ensemble needs the one model and is returned as it is.
func KeptModels(est selection.Estimator, own int) (selection.Estimator, []int) {
	if est.Kind != selection.KindEnsemble {
		return est, nil
	}
	var used []int
	for _, k := range est.Kernels() {
		if k != own {
			used = append(used, k)
		}
	}
	est.Members = slices.Clone(est.Members)
	for j, m := range est.Members {
		if m.Kernel == own {
			est.Members[j].Kernel = 0
		} else {
			est.Members[j].Kernel = slices.Index(used, m.Kernel) + 1
		}
	}
	return est, used
}

// KernelLabel names a kernel in candidate names and in a run's list of
// kernels: matern(nu=1.5), and at a grid point
// gaussian(features=100,linear=0).
func KernelLabel(k modelstore.Kernel) string {
	var parts []string
	if len(k.Params) > 0 {
		parts = append(parts, kernels.Params(k.Params).String())
	}
	if k.Features > 0 {
		parts = append(parts, fmt.Sprintf("features=%d", k.Features))
	}
	if k.Linear != nil {
		parts = append(parts, fmt.Sprintf("linear=%g", *k.Linear))
	}
	if k.Transfer != "" {
		parts = append(parts, "transfer="+k.Transfer)
	}
	if len(parts) == 0 {
		return k.Name
	}
	return fmt.Sprintf("%s(%s)", k.Name, strings.Join(parts, ","))
}

// SelectionRows are the crff_model_selection rows of candidates scored on
// n held-out rows; kernel names the kernel of index k. site, when not nil,
// says how the site's own choice came about (a choice per site).
func SelectionRows(cands []selection.Candidate, kernel func(k int) string, n int, site *selection.SiteScores) []store.Selection {
	var out []store.Selection
	for c, cand := range cands {
		row := store.Selection{Candidate: cand.Name, Kind: cand.Kind, Ridge: cand.Ridge, Loss: cand.Loss, SE: cand.SE,
			Diff: cand.Diff, DiffSE: cand.DiffSE, Chosen: cand.Chosen, Member: cand.Member, N: n}
		if site != nil && c < len(site.Diff) {
			row.Site = &store.SiteDiffs{Diff: site.Diff[c], DiffSE: site.DiffSE[c]}
			if c < len(site.Own) {
				row.Site.Own, row.Site.OwnSE = &site.Own[c], &site.OwnSE[c]
			}
		}
		if cand.Kind == selection.KindLatent || cand.Kind == selection.KindOutcome {
			row.Kernel = kernel(cand.Kernel)
		}
		out = append(out, row)
	}
	return out
}

// Selection asks a site alone to choose its estimator and kernel on
// held-out rows (package selection).
type Selection struct {
	Kinds []string // the candidate kinds; empty: every kind
	// Kernels are the candidate kernels, and Candidates the same with
	// their open plugins, in the same order.
	Kernels    []modelstore.Kernel
	Candidates []selection.Kernel
	Share      float64 // the share of each arm's rows held out
	Z          float64 // selection.Options.Z
	BySite     bool    // selection.Options.BySite: one site's own choice is the federation's
	// Thresholds are the τ̂ thresholds T of the rules cate_above_T of
	// crff_policy (HeterogeneityInput.Thresholds).
	Thresholds []float64
	// OnFitted, when not nil, is told as each kernel's models are fitted.
	OnFitted func(done, total int)
}

// Selected is the outcome of fitting with model selection.
type Selected struct {
	Fitted     // the chosen estimator with the models it needs
	Result     *selection.Result
	Rows       []store.Selection // crff_model_selection
	Validation int               // held-out rows
	Held       []int             // their indices, in the site's rows
	Losses     []store.Loss      // the training rounds of the chosen estimator's first kernel
}

// Select holds c.Share of the rows of data out, fits every candidate of c
// on the others with cfg, and chooses one on the held-out rows.
func Select(ctx context.Context, data *estimator.Data, schema estimator.Schema, cfg estimator.Config, c Selection) (*Selected, error) {
	_, valRows, err := selection.Holdout(data.W, c.Share, cfg.Seed)
	if err != nil {
		return nil, err
	}
	opt := selection.Options{Kinds: c.Kinds, Z: c.Z, OnFitted: c.OnFitted, Kernels: c.Candidates, BySite: c.BySite}
	res, err := selection.Run(ctx, []*estimator.Data{data}, [][]int{valRows}, schema, cfg, opt)
	if err != nil {
		return nil, fmt.Errorf("model selection: %w", err)
	}
	est, _, err := res.Estimator(res.Chosen, 0)
	if err != nil {
		return nil, err
	}
	// The model of the ensemble's first kernel is the run's; the others
	// are kept beside it, renumbered from 1.
	own := est.Kernels()[0]
	est, used := KeptModels(est, own)
	out := &Selected{Fitted: Fitted{Models: []*estimator.Model{res.Models[own]}, Kernels: []modelstore.Kernel{c.Kernels[own]}, Estimator: est},
		Result: res, Validation: len(valRows), Held: valRows}
	for _, k := range used {
		out.Models, out.Kernels = append(out.Models, res.Models[k]), append(out.Kernels, c.Kernels[k])
	}
	for _, p := range res.Progress[own] {
		out.Losses = append(out.Losses, store.Loss{Model: p.Model.String(), Round: p.Round, Loss: p.Loss})
	}
	scores, err := res.SiteScores(0)
	if err != nil {
		return nil, err
	}
	out.Rows = SelectionRows(res.Candidates, func(k int) string { return KernelLabel(c.Kernels[k]) }, len(valRows), scores)
	return out, nil
}
