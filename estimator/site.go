package estimator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/mat"
)

// SiteInput is what the coordinator sends a site in one round of training
// model Model: the site's effective weights W_c^s and the shared parameters.
type SiteInput struct {
	Model Kind
	Round int
	// Noise keys the latent model's noise draws ε: 0 in every round when the
	// draws are held fixed (L-BFGS), the round number otherwise (Adam).
	Noise   uint64
	Weights map[string]*mat.Dense // by Block.Name, 2D×k each
	Shared  map[string][]float64  // by Param.Name
}

// SiteOutput is what a site returns: its loss J^(s) (data terms only; the
// coordinator adds the regularisers), G_c^s = ∂J^(s)/∂W_c^s and the
// gradients of the shared parameters.
type SiteOutput struct {
	Model  Kind
	Round  int
	Site   int
	Rows   int // training rows behind Loss
	Loss   float64
	Grads  map[string]*mat.Dense // by Block.Name, same shapes as the weights
	Shared map[string][]float64  // by Param.Name
}

// Site is one data holder's side of training: its prepared rows and the
// workspaces of the three models. A Site is not safe for concurrent use;
// different Sites are independent.
type Site struct {
	index int
	chunk uint64 // c+1 for the Site of chunk c of a mini-batch (see batch), else 0
	setup *Setup
	lays  [3]*layout

	n, n0 int // rows; the n0 control rows come first

	// The rows as read: prepared position k is row at(k) of data, where
	// at(k) = rows[order[k]], or order[k] when rows is nil. A Site that
	// trains on mini-batches reads each batch from them; x, w, y and pos
	// are made only for computations on every row (see prepare).
	data  *Data
	rows  []int
	order []int32
	dx    int

	pos  []int      // pos[i] = prepared position of original row i; nil until prepare
	x    *mat.Dense // n×dx standardised covariates, arm-sorted; nil until prepare
	w, y []float64  // arm-sorted treatments and outcomes (model units); nil until prepare

	prop, out *rffLayer // feature maps on fixed inputs, built lazily
	lat       *latentWork
	col       *mat.Dense // n×1 scratch; nil until prepare
	dcol      *mat.Dense // n×1 scratch; nil until prepare
	outs      [3]*SiteOutput
	bt        *batches     // mini-batches (Config.BatchSize); nil until the first
	priv      *Privacy     // nil: exact answers (see SetPrivacy)
	pw        *privateWork // the private rounds' workspaces; nil until the first
	rowKeys   []uint64     // under priv: each prepared row's key (see rowKeys)
	sample    []int        // under priv: the current round's sampled rows
}

// NewSite prepares site index's rows for training under setup. Rows are
// standardised with setup.Scaler and reordered so that control rows come
// first, which lets each arm's weights act on a contiguous block of rows.
// A Site that trains on mini-batches (Config.BatchSize below its rows)
// holds no copy of its rows: it reads and standardises each batch from
// data, which must not change while the Site is in use.
func NewSite(index int, data *Data, setup *Setup) (*Site, error) {
	return newSite(index, data, nil, setup)
}

// NewSiteRows is NewSite of the rows of data at positions rows (nil: every
// row), which are read in place and must not change while the Site is in
// use either.
func NewSiteRows(index int, data *Data, rows []int, setup *Setup) (*Site, error) {
	return newSite(index, data, rows, setup)
}

func newSite(index int, data *Data, rows []int, setup *Setup) (*Site, error) {
	if setup == nil {
		return nil, errors.New("estimator: nil setup")
	}
	if err := validateData(data, setup.Schema); err != nil {
		return nil, err
	}
	if err := setup.checkOutcomes(data); err != nil {
		return nil, fmt.Errorf("site %d: %w", index, err)
	}
	n := data.Rows()
	if rows != nil {
		n = len(rows)
	}
	if n == 0 {
		return nil, fmt.Errorf("estimator: site %d has no rows", index)
	}
	if n > math.MaxInt32 {
		return nil, fmt.Errorf("estimator: site %d has %d rows; at most %d", index, n, math.MaxInt32)
	}
	_, dx := data.X.Dims()
	s := &Site{index: index, setup: setup, n: n, data: data, rows: rows, order: make([]int32, n), dx: dx}
	for i := range s.order {
		s.order[i] = int32(i)
	}
	sort.SliceStable(s.order, func(a, b int) bool { return data.W[s.at(a)] < data.W[s.at(b)] })
	for k := range s.order {
		if data.W[s.at(k)] == 0 {
			s.n0++
		}
	}
	for _, k := range Kinds {
		s.lays[k] = newLayout(k, setup)
	}
	if s.batchSize() == s.n {
		s.prepare()
	}
	return s, nil
}

// at returns the row of data at prepared position k.
func (s *Site) at(k int) int {
	if s.rows != nil {
		return s.rows[s.order[k]]
	}
	return int(s.order[k])
}

// readRow sets dst, the treatment and the outcome (model units) to those of
// prepared position k, its covariates standardised.
func (s *Site) readRow(k int, dst []float64) (w, y float64) {
	r := s.at(k)
	s.setup.Scaler.standardizeRow(dst, s.data.X.RawRowView(r))
	return s.data.W[r], s.setup.yToModel(s.data.Y[r])
}

// prepare makes the Site hold its rows standardised and arm-sorted (x, w,
// y) and the workspaces of computations on every row: what a Site that
// computes on every row, or is private (whose rounds sample rows by key),
// needs. A Site of mini-batches never calls it and holds none of them.
func (s *Site) prepare() {
	if s.x != nil {
		return
	}
	n := s.n
	s.pos, s.x, s.w, s.y = make([]int, n), mat.NewDense(n, s.dx, nil), make([]float64, n), make([]float64, n)
	s.col, s.dcol = mat.NewDense(n, 1, nil), mat.NewDense(n, 1, nil)
	for k, i := range s.order {
		s.pos[i] = k
		s.w[k], s.y[k] = s.readRow(k, s.x.RawRowView(k))
	}
}

// Index returns the site's number in the federation.
func (s *Site) Index() int { return s.index }

// Rows returns the number of training rows.
func (s *Site) Rows() int { return s.n }

// Release drops the workspaces of the models. The next Compute rebuilds
// them; a simulated federation of many sites calls it after each model.
func (s *Site) Release() {
	s.prop, s.out, s.lat, s.bt, s.pw = nil, nil, nil, nil, nil
	s.outs = [3]*SiteOutput{}
}

// Compute evaluates the site's part of the objective of model in.Model at
// the given weights: J^(s), ∂J^(s)/∂W^s and the shared-parameter gradients;
// with mini-batches (Config.BatchSize), n/B times those of round in.Round's
// batch, an unbiased estimate of them. It is deterministic in its inputs. The returned output is owned by the
// Site and valid until the next Compute of the same model.
func (s *Site) Compute(ctx context.Context, in *SiteInput) (*SiteOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if in == nil || in.Model < Propensity || in.Model > Latent {
		return nil, errors.New("estimator: invalid site input")
	}
	lay := s.lays[in.Model]
	if err := checkInput(lay, in); err != nil {
		return nil, fmt.Errorf("estimator: site %d: %w", s.index, err)
	}
	if s.priv != nil {
		return s.computePrivate(ctx, in)
	}
	if s.batchSize() < s.n {
		return s.computeBatch(ctx, in)
	}
	s.prepare()
	out := s.output(lay)
	out.Round = in.Round
	switch in.Model {
	case Propensity:
		s.propensity(in, out)
	case Outcome:
		s.outcome(in, out)
	case Latent:
		s.latent(in, out)
	}
	return out, nil
}

func checkInput(lay *layout, in *SiteInput) error {
	for _, b := range lay.blocks {
		w, ok := in.Weights[b.Name]
		if !ok || w == nil {
			return fmt.Errorf("%v weights %q missing", lay.kind, b.Name)
		}
		if r, c := w.Dims(); r != b.Rows || c != b.Cols {
			return fmt.Errorf("%v weights %q are %d×%d, want %d×%d", lay.kind, b.Name, r, c, b.Rows, b.Cols)
		}
	}
	for _, p := range lay.shared {
		if len(in.Shared[p.Name]) != p.Size {
			return fmt.Errorf("%v shared %q has %d values, want %d", lay.kind, p.Name, len(in.Shared[p.Name]), p.Size)
		}
	}
	return nil
}

// output returns the site's reusable output message for lay's model.
func (s *Site) output(lay *layout) *SiteOutput {
	if o := s.outs[lay.kind]; o != nil {
		return o
	}
	o := newOutput(lay, s.index)
	o.Rows = s.n
	s.outs[lay.kind] = o
	return o
}

// newOutput returns a zero output of lay's model for site index.
func newOutput(lay *layout, index int) *SiteOutput {
	o := &SiteOutput{
		Model: lay.kind, Site: index,
		Grads:  make(map[string]*mat.Dense, len(lay.blocks)),
		Shared: make(map[string][]float64, len(lay.shared)),
	}
	for _, b := range lay.blocks {
		o.Grads[b.Name] = mat.NewDense(b.Rows, b.Cols, nil)
	}
	for _, p := range lay.shared {
		o.Shared[p.Name] = make([]float64, p.Size)
	}
	return o
}

// armRows returns the control and treated row blocks of v (rows = site
// rows); a block of an arm without rows has no rows.
func (s *Site) armRows(v strided) (ctl, trt strided) {
	return v.block(0, s.n0, 0, v.cols), v.block(s.n0, s.n, 0, v.cols)
}

// arms returns the control and treated row blocks of m (rows = site rows),
// either of which is nil when the site has no rows in that arm.
func (s *Site) arms(m *mat.Dense) (ctl, trt *mat.Dense) {
	_, c := m.Dims()
	if s.n0 > 0 {
		ctl = m.Slice(0, s.n0, 0, c).(*mat.Dense)
	}
	if s.n0 < s.n {
		trt = m.Slice(s.n0, s.n, 0, c).(*mat.Dense)
	}
	return ctl, trt
}
