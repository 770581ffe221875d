package estimator

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/internal/parallel"
)

// Trained is a fitted model: each site's effective weights W^s, the shared
// parameters and the transfer matrix.
type Trained struct {
	Model   Kind
	Weights []map[string]*mat.Dense // per site: W_c^s by block name
	Shared  map[string][]float64
	Lambda  *mat.SymDense // m×m, Λ_sv = λ^{s,v}, ones on the diagonal
	Rounds  int           // federated rounds spent
	Loss    float64       // J at the returned parameters
}

// LambdaRows returns Λ as rows, Λ[s][v] = λ^{s,v}, or nil when t has no
// Λ: the form reports and the coordinator's run history keep.
func (t *Trained) LambdaRows() [][]float64 {
	if t == nil || t.Lambda == nil {
		return nil
	}
	n := t.Lambda.SymmetricDim()
	rows := make([][]float64, n)
	for i := range rows {
		rows[i] = make([]float64, n)
		for j := range rows[i] {
			rows[i][j] = t.Lambda.At(i, j)
		}
	}
	return rows
}

// Result returns the model at the optimiser's final parameters. It is
// meaningful once Done reports true.
func (c *Coordinator) Result() *Trained {
	x, f := c.opt.result()
	c.effective(x)
	t := &Trained{
		Model:   c.lay.kind,
		Weights: make([]map[string]*mat.Dense, c.m),
		Shared:  make(map[string][]float64, len(c.lay.shared)),
		Lambda:  mat.NewSymDense(c.m, nil),
		Rounds:  c.round,
		Loss:    f,
	}
	for s := range c.m {
		t.Weights[s] = make(map[string]*mat.Dense, len(c.lay.blocks))
		row := c.w.RawRowView(s)
		for b, blk := range c.lay.blocks {
			t.Weights[s][blk.Name] = mat.DenseCopyOf(c.lay.blockView(row, b))
		}
		for v := s; v < c.m; v++ {
			t.Lambda.SetSym(s, v, c.lam.At(s, v))
		}
	}
	for _, in := range c.inputs[:1] {
		for name, v := range in.Shared {
			t.Shared[name] = append([]float64(nil), v...)
		}
	}
	return t
}

// Train runs the simulated federation of one model to completion: every
// round it asks the coordinator for the sites' inputs, has each site compute
// its output (at most workers sites at once; results do not depend on
// workers) and passes them back.
func Train(ctx context.Context, c *Coordinator, sites []*Site, workers int) (*Trained, error) {
	if len(sites) != c.m {
		return nil, fmt.Errorf("estimator: %d sites for a coordinator of %d", len(sites), c.m)
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(sites))
	outs := make([]*SiteOutput, len(sites))
	for !c.Done() {
		if err := Round(ctx, c, sites, workers, outs); err != nil {
			return nil, err
		}
		reportProgress(ctx, c)
	}
	return c.Result(), nil
}

// Round runs one round of the simulated federation: the sites' Compute on
// the coordinator's Inputs, at most workers sites at once, then Update. outs
// (one per site) receives the sites' outputs.
func Round(ctx context.Context, c *Coordinator, sites []*Site, workers int, outs []*SiteOutput) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(sites) != c.m || len(outs) != c.m {
		return fmt.Errorf("estimator: %d sites and %d outputs for a coordinator of %d", len(sites), len(outs), c.m)
	}
	ins := c.Inputs()
	if ins == nil {
		return errors.New("estimator: training has finished")
	}
	errs := make([]error, len(sites))
	parallel.ForEach(len(sites), workers, func(s int) { outs[s], errs[s] = sites[s].Compute(ctx, ins[s]) })
	if err := errors.Join(errs...); err != nil {
		return err
	}
	_, err := c.Update(outs)
	return err
}

// Model is a fitted CausalRFF model of a federation.
type Model struct {
	Setup      *Setup
	Propensity *Trained
	Outcome    *Trained
	Latent     *Trained
}

// Trained returns the fitted model of kind k.
func (m *Model) Trained(k Kind) *Trained {
	switch k {
	case Propensity:
		return m.Propensity
	case Outcome:
		return m.Outcome
	case Latent:
		return m.Latent
	}
	return nil
}

// PooledScaler validates the sites' rows against schema and pools their
// Moments, in site order, into the standardisation every site applies.
func PooledScaler(sites []*Data, schema Schema) (Scaler, error) {
	if len(sites) == 0 {
		return Scaler{}, errors.New("estimator: no sites")
	}
	moments := make([]Moments, len(sites))
	for s, d := range sites {
		if err := validateData(d, schema); err != nil {
			return Scaler{}, fmt.Errorf("estimator: site %d: %w", s, err)
		}
		moments[s] = d.Moments()
	}
	return NewScaler(schema, moments)
}

// Fit trains the three models of CausalRFF on the sites' rows by simulated
// federation: the pooled standardisation from the sites' Moments, the
// base frequencies from spectral, then Train for the propensity, outcome
// and latent models in turn.
func Fit(ctx context.Context, sites []*Data, schema Schema, spectral Spectral, cfg Config) (*Model, error) {
	scaler, err := PooledScaler(sites, schema)
	if err != nil {
		return nil, err
	}
	setup, err := NewSetup(ctx, schema, spectral, cfg, scaler)
	if err != nil {
		return nil, err
	}
	return fitKinds(ctx, sites, setup, Kinds...)
}

// FitSetup trains the three models of CausalRFF on the sites' rows under
// an agreed setup, by simulated federation, as Fit does after agreeing it.
// Model selection agrees the setup on more rows than it trains on.
func FitSetup(ctx context.Context, sites []*Data, setup *Setup) (*Model, error) {
	for s, d := range sites {
		if err := validateData(d, setup.Schema); err != nil {
			return nil, fmt.Errorf("estimator: site %d: %w", s, err)
		}
	}
	return fitKinds(ctx, sites, setup, Kinds...)
}

// FitPrivate is FitSetup with site s's answers made private under
// privacy[s] (Site.SetPrivacy); a nil entry, or a short slice, leaves a
// site exact. Each Privacy's Rand, when set, serves that site alone.
func FitPrivate(ctx context.Context, sites []*Data, setup *Setup, privacy []*Privacy) (*Model, error) {
	for s, d := range sites {
		if err := validateData(d, setup.Schema); err != nil {
			return nil, fmt.Errorf("estimator: site %d: %w", s, err)
		}
	}
	return fitPrivate(ctx, sites, setup, privacy, Kinds...)
}

// fitKinds trains the models kinds, in turn, on the sites' rows under setup
// by simulated federation. The models it does not train stay nil.
func fitKinds(ctx context.Context, sites []*Data, setup *Setup, kinds ...Kind) (*Model, error) {
	return fitPrivate(ctx, sites, setup, nil, kinds...)
}

func fitPrivate(ctx context.Context, sites []*Data, setup *Setup, privacy []*Privacy, kinds ...Kind) (*Model, error) {
	ss := make([]*Site, len(sites))
	for s, d := range sites {
		var err error
		if ss[s], err = NewSite(s, d, setup); err != nil {
			return nil, err
		}
		if s < len(privacy) && privacy[s] != nil {
			if err := ss[s].SetPrivacy(privacy[s]); err != nil {
				return nil, fmt.Errorf("estimator: site %d: %w", s, err)
			}
		}
	}
	return fitSites(ctx, ss, setup, kinds...)
}

// FitSetupRows is FitSetup of the rows of each site s at positions
// rows[s] (nil: every row), read in place rather than copied first.
func FitSetupRows(ctx context.Context, sites []*Data, rows [][]int, setup *Setup) (*Model, error) {
	if len(rows) != len(sites) {
		return nil, fmt.Errorf("estimator: %d sites and %d sets of rows", len(sites), len(rows))
	}
	ss := make([]*Site, len(sites))
	for s, d := range sites {
		var err error
		if ss[s], err = newSite(s, d, rows[s], setup); err != nil {
			return nil, fmt.Errorf("estimator: site %d: %w", s, err)
		}
	}
	return fitSites(ctx, ss, setup, Kinds...)
}

// fitRows trains the models kinds on the rows of d at positions rows, as
// the one site of a simulated federation, without copying them first.
func fitRows(ctx context.Context, d *Data, rows []int, setup *Setup, kinds ...Kind) (*Model, error) {
	s, err := newSite(0, d, rows, setup)
	if err != nil {
		return nil, err
	}
	return fitSites(ctx, []*Site{s}, setup, kinds...)
}

// fitSites trains the models kinds, in turn, on the prepared sites ss.
func fitSites(ctx context.Context, ss []*Site, setup *Setup, kinds ...Kind) (*Model, error) {
	model := &Model{Setup: setup}
	for _, k := range kinds {
		c, err := NewCoordinator(k, len(ss), setup)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		t, err := Train(ctx, c, ss, setup.Config.Workers)
		if err != nil {
			return nil, fmt.Errorf("estimator: training the %v model: %w", k, err)
		}
		rows := 0
		for _, site := range ss {
			rows = max(rows, site.Rows())
		}
		reportTraining(ctx, Training{Model: k, Rows: rows, Rounds: c.Round(), Elapsed: time.Since(start)})
		for _, site := range ss {
			site.Release()
		}
		switch k {
		case Propensity:
			model.Propensity = t
		case Outcome:
			model.Outcome = t
		case Latent:
			model.Latent = t
		}
	}
	return model, nil
}
