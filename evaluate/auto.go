package evaluate

import (
	"context"
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/selection"
)

// Kernel is a kernel the auto mode fits the latent model with, and its
// name in candidate names.
type Kernel struct {
	Name     string
	Spectral estimator.Spectral
}

// RidgeGrid are the ridge penalties of the DR-learner and T-learner
// candidates of the auto mode.
var RidgeGrid = []float64{1, 10, 100}

// Candidate is one candidate of an auto run: its validation figures and,
// for the record only, its errors on the test rows.
type Candidate struct {
	Name     string  `json:"name"`
	Loss     float64 `json:"loss"`
	LossSE   float64 `json:"loss_se"`
	Diff     float64 `json:"diff"`
	DiffSE   float64 `json:"diff_se"`
	Chosen   bool    `json:"chosen,omitempty"`
	SqrtPEHE float64 `json:"sqrt_pehe"`
	ATEErr   float64 `json:"ate_err"`
}

// candidateCATEs holds one candidate's CATEs of each source's validation
// rows and of the test rows.
type candidateCATEs struct {
	name string
	val  [][]float64 // per source
	test []float64
}

// runAuto fits every candidate on the training rows of the sources, scores
// them on the validation rows of every source with the doubly robust loss
// (package selection), and reports the chosen candidate's CATE on the test
// rows. The test rows play no part in the choice.
func runAuto(ctx context.Context, p Plan, sources []split, schema estimator.Schema) (Result, []float64, error) {
	r := Result{Mode: "auto", Sources: len(sources)}
	k := len(sources)
	train := make([]*estimator.Data, k)
	val := make([]*estimator.Data, k)
	for i, s := range sources {
		train[i], val[i] = s.train.Data(), s.val.Data()
		if val[i].Rows() < 2 {
			return r, nil, fmt.Errorf("%w: auto needs validation rows in every source (source %d has %d)", ErrPlan, i+1, val[i].Rows())
		}
	}
	test := sources[p.TestSource-1].test.Data()
	kernels := p.Kernels
	if len(kernels) == 0 {
		kernels = []Kernel{{Name: "kernel", Spectral: p.Spectral}}
	}
	var cands []candidateCATEs
	var base *estimator.Model
	for _, kn := range kernels {
		model, err := estimator.Fit(ctx, train, schema, kn.Spectral, p.Config)
		if err != nil {
			return r, nil, fmt.Errorf("kernel %s: %w", kn.Name, err)
		}
		r.Rounds += model.Propensity.Rounds + model.Outcome.Rounds + model.Latent.Rounds
		if base == nil {
			base = model
		}
		lat := candidateCATEs{name: "latent/" + kn.Name}
		out := candidateCATEs{name: "outcome/" + kn.Name}
		for s := range k {
			e, err := model.Effects(ctx, s, val[s])
			if err != nil {
				return r, nil, err
			}
			o, err := model.OutcomeCATE(s, val[s])
			if err != nil {
				return r, nil, err
			}
			lat.val, out.val = append(lat.val, e.CATE), append(out.val, o)
		}
		e, err := model.Effects(ctx, p.TestSource-1, test)
		if err != nil {
			return r, nil, err
		}
		lat.test = e.CATE
		if out.test, err = model.OutcomeCATE(p.TestSource-1, test); err != nil {
			return r, nil, err
		}
		cands = append(cands, lat, out)
	}
	ridge, err := ridgeCandidates(ctx, base, train, val, test)
	if err != nil {
		return r, nil, err
	}
	cands = append(cands, ridge...)

	// The criterion's pseudo-outcomes: nuisances cross-fitted on each
	// source's validation rows, under a setup agreed on all rows of the
	// sources, the same for every candidate.
	psi, err := validationScores(ctx, p, kernels[0].Spectral, schema, train, val)
	if err != nil {
		return r, nil, err
	}
	sums := make([]selection.Sums, len(cands))
	for s := range k {
		cates := make([][]float64, len(cands))
		for c := range cands {
			cates[c] = cands[c].val[s]
		}
		site, err := selection.Losses(psi[s], cates, 0)
		if err != nil {
			return r, nil, fmt.Errorf("source %d: %w", s+1, err)
		}
		for c := range sums {
			sums[c].Add(site[c])
		}
	}
	scores, chosen, err := selection.Choose(sums, 0, p.z())
	if err != nil {
		return r, nil, err
	}
	tau := sources[p.TestSource-1].test.Tau()
	for c, sc := range scores {
		cr := Candidate{Name: cands[c].name, Loss: sc.Loss, LossSE: sc.SE, Diff: sc.Diff, DiffSE: sc.DiffSE, Chosen: sc.Chosen}
		if cr.SqrtPEHE, err = estimator.SqrtPEHE(cands[c].test, tau); err != nil {
			return r, nil, err
		}
		if cr.ATEErr, err = estimator.ATEError(cands[c].test, tau); err != nil {
			return r, nil, err
		}
		r.Candidates = append(r.Candidates, cr)
	}
	r.Chosen = cands[chosen].name
	return r, cands[chosen].test, nil
}

// ridgeCandidates fits the T-learner (per-arm ridge regression of y) and
// the DR-learner (ridge regression of doubly robust pseudo-outcomes,
// cross-fitted on each source's training rows) on the outcome features of
// base, from sums over the sources, for every penalty of RidgeGrid.
func ridgeCandidates(ctx context.Context, base *estimator.Model, train, val []*estimator.Data, test *estimator.Data) ([]candidateCATEs, error) {
	k := len(train)
	phiVal := make([]*mat.Dense, k)
	for s := range k {
		var err error
		if phiVal[s], err = base.OutcomeFeatures(val[s]); err != nil {
			return nil, err
		}
	}
	phiTest, err := base.OutcomeFeatures(test)
	if err != nil {
		return nil, err
	}
	_, p := phiTest.Dims()
	arms := [2]*estimator.RidgeStats{estimator.NewRidgeStats(p), estimator.NewRidgeStats(p)}
	dr := estimator.NewRidgeStats(p)
	for s, d := range train {
		phi, err := base.OutcomeFeatures(d)
		if err != nil {
			return nil, err
		}
		var rows [2][]int
		for i, w := range d.W {
			rows[int(w)] = append(rows[int(w)], i)
		}
		for a := range 2 {
			if err := arms[a].AddRows(phi, d.Y, rows[a]); err != nil {
				return nil, err
			}
		}
		nu, err := estimator.CrossFit(ctx, base.Setup, s, d)
		if err != nil {
			return nil, err
		}
		psi, _, err := inference.Scores(d.W, d.Y, nu, inference.DefaultClip)
		if err != nil {
			return nil, err
		}
		if err := dr.AddRows(phi, psi, nil); err != nil {
			return nil, err
		}
	}
	var out []candidateCATEs
	for _, lambda := range RidgeGrid {
		tl := candidateCATEs{name: fmt.Sprintf("tlearner/%g", lambda)}
		var f [2]estimator.Ridge
		for a := range 2 {
			if f[a], err = arms[a].Solve(lambda); err != nil {
				return nil, fmt.Errorf("t-learner arm %d: %w", a, err)
			}
		}
		diff := func(phi *mat.Dense) []float64 {
			y0, y1 := f[0].Predict(phi), f[1].Predict(phi)
			for i := range y1 {
				y1[i] -= y0[i]
			}
			return y1
		}
		g, err := dr.Solve(lambda)
		if err != nil {
			return nil, fmt.Errorf("dr-learner: %w", err)
		}
		drc := candidateCATEs{name: fmt.Sprintf("dr/%g", lambda)}
		for s := range k {
			tl.val = append(tl.val, diff(phiVal[s]))
			drc.val = append(drc.val, g.Predict(phiVal[s]))
		}
		tl.test, drc.test = diff(phiTest), g.Predict(phiTest)
		out = append(out, tl, drc)
	}
	return out, nil
}

// validationScores returns the doubly robust pseudo-outcomes of each
// source's validation rows, with nuisances cross-fitted on those rows.
func validationScores(ctx context.Context, p Plan, spectral estimator.Spectral, schema estimator.Schema, train, val []*estimator.Data) ([][]float64, error) {
	var moments []estimator.Moments
	for s := range train {
		moments = append(moments, train[s].Moments(), val[s].Moments())
	}
	scaler, err := estimator.NewScaler(schema, moments)
	if err != nil {
		return nil, err
	}
	setup, err := estimator.NewSetup(ctx, schema, spectral, p.Config, scaler)
	if err != nil {
		return nil, err
	}
	out := make([][]float64, len(val))
	for s, d := range val {
		nu, err := estimator.CrossFit(ctx, setup, s, d)
		if err != nil {
			return nil, fmt.Errorf("validation rows of source %d: %w", s+1, err)
		}
		if out[s], _, err = inference.Scores(d.W, d.Y, nu, inference.DefaultClip); err != nil {
			return nil, fmt.Errorf("validation rows of source %d: %w", s+1, err)
		}
	}
	return out, nil
}

// z is the selection threshold of the plan.
func (p Plan) z() float64 {
	if p.SelectionZ == nil {
		return selection.DefaultZ
	}
	return *p.SelectionZ
}
