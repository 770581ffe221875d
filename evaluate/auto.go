package evaluate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/internal/parallel"
	"github.com/crffd/crffd/selection"
)

// Candidate is one candidate of an auto run: its validation figures and,
// for the record only, its errors on the test rows.
type Candidate struct {
	Name     string   `json:"name"`
	Loss     float64  `json:"loss"`
	LossSE   *float64 `json:"loss_se,omitempty"` // absent for the ensemble (selection.Ensembled)
	Diff     float64  `json:"diff"`
	DiffSE   *float64 `json:"diff_se,omitempty"`
	Member   bool     `json:"member,omitempty"`
	Chosen   bool     `json:"chosen,omitempty"`
	SqrtPEHE float64  `json:"sqrt_pehe"`
	ATEErr   float64  `json:"ate_err"`
}

// runAuto runs selection.Run on the training and validation rows of the
// sources and returns the chosen candidate's CATE of the test rows, which
// play no part in the choice.
func runAuto(ctx context.Context, p Plan, sources []split, schema estimator.Schema) (Result, []float64, error) {
	r := Result{Mode: "auto", Sources: len(sources)}
	// Each source's training rows, then its validation rows.
	rows := make([]*estimator.Data, len(sources))
	val := make([][]int, len(sources))
	for i, s := range sources {
		train, held := s.train.Data(), s.val.Data()
		if held.Rows() < 2 {
			return r, nil, fmt.Errorf("%w: auto needs validation rows in every source (source %d has %d)", ErrPlan, i+1, held.Rows())
		}
		rows[i] = train.Append(held)
		for j := range held.Rows() {
			val[i] = append(val[i], train.Rows()+j)
		}
	}
	opt := selection.Options{Kernels: p.Kernels, Z: selection.DefaultZ, Kinds: p.AutoKinds, BySite: p.AutoBySite}
	if len(opt.Kernels) == 0 {
		opt.Kernels = []selection.Kernel{{Name: "kernel", Spectral: p.Spectral}}
	}
	if p.SelectionZ != nil {
		opt.Z = *p.SelectionZ
	}
	sel, err := selection.Run(ctx, rows, val, schema, p.Config, opt)
	if err != nil {
		return r, nil, err
	}
	for _, m := range sel.Models {
		r.Rounds += m.Propensity.Rounds + m.Outcome.Rounds + m.Latent.Rounds
	}
	testSource := p.TestSource - 1
	test := sources[testSource].test
	tau := test.Tau()
	// Every candidate's CATE of the test rows, for the record, on every
	// core; each is a function of its candidate and rows alone.
	cates := make([][]float64, len(sel.Candidates))
	errs := make([]error, len(cates))
	parallel.ForEach(len(cates), 0, func(c int) {
		cates[c], errs[c] = sel.CATE(ctx, c, testSource, test.Data())
	})
	if err := errors.Join(errs...); err != nil {
		return r, nil, err
	}
	var chosen []float64
	for c, cand := range sel.Candidates {
		cate := cates[c]
		cr := Candidate{Name: cand.Name, Loss: cand.Loss, Diff: cand.Diff, Member: cand.Member, Chosen: cand.Chosen}
		if cand.Kind != selection.KindEnsemble {
			cr.LossSE, cr.DiffSE = &cand.SE, &cand.DiffSE
		}
		var err error
		if cr.SqrtPEHE, err = estimator.SqrtPEHE(cate, tau); err != nil {
			return r, nil, err
		}
		if cr.ATEErr, err = estimator.ATEError(cate, tau); err != nil {
			return r, nil, err
		}
		r.Candidates = append(r.Candidates, cr)
		if c == sel.Chosen {
			chosen = cate
		}
	}
	r.Chosen = membersName(sel.Candidates, sel.Ensemble.SiteMembers(testSource))
	// The AIPW estimate and the calibrated CATE of the chosen ensemble, as
	// for the other modes, with the reference kernel's models, on whose
	// training rows the nuisance learners are fitted.
	if err := r.aipw(ctx, sel.Models[0], testSource, sources[testSource].train.Data(), test.Data(), chosen, tau, test.Mu0, p.CrossFit, nil); err != nil {
		return r, nil, err
	}
	return r, chosen, nil
}

// membersName names the ensemble of candidates members by its members:
// "latent/gaussian + tlearner/10".
func membersName(cands []selection.Candidate, members []int) string {
	var names []string
	for _, c := range members {
		names = append(names, cands[c].Name)
	}
	return strings.Join(names, " + ")
}
