package estimator

import (
	"context"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// TLearnerRidge is the ridge penalty of the T-learner baseline. It is fixed
// rather than tuned: the baseline shows what the same random features give
// without the latent model and without transfer.
const TLearnerRidge = 1.0

// TLearner is the baseline of the benchmark tables: one ridge regression of
// y on the random Fourier features of x per treatment arm, on the rows of
// all sites pooled. CATE(x) = f₁(x) − f₀(x).
type TLearner struct {
	scaler Scaler
	fm     FeatureMap
	a      float64
	beta   [2]*mat.VecDense // per arm, 2D weights on centred features
	fmean  [2]*mat.VecDense // per arm, mean feature vector of its rows
	ymean  [2]float64
}

// FitTLearner fits the baseline. It uses cfg.Features frequencies drawn
// with cfg.Seed, and the same pooled standardisation and initial log-scale
// as the CausalRFF models.
func FitTLearner(ctx context.Context, sites []*Data, schema Schema, spectral Spectral, cfg Config) (*TLearner, error) {
	scaler, err := PooledScaler(sites, schema)
	if err != nil {
		return nil, err
	}
	dx := len(schema.Binary)
	omega, err := spectral.Sample(ctx, dx, cfg.Features, cfg.Seed)
	if err != nil {
		return nil, fmt.Errorf("estimator: t-learner frequencies: %w", err)
	}
	t := &TLearner{scaler: scaler, fm: FeatureMap{Omega0: omega}, a: cfg.InitLogScale}
	if t.a == 0 {
		t.a = -0.5 * math.Log(float64(dx))
	}
	for arm := range 2 {
		var rows [][]float64
		var ys []float64
		for _, d := range sites {
			for i := range d.Rows() {
				if d.W[i] == float64(arm) {
					rows = append(rows, d.X.RawRowView(i))
					ys = append(ys, d.Y[i])
				}
			}
		}
		if len(rows) == 0 {
			return nil, fmt.Errorf("estimator: t-learner: no rows with treatment %d", arm)
		}
		x := mat.NewDense(len(rows), dx, nil)
		for i, r := range rows {
			x.SetRow(i, r)
		}
		if err := t.fitArm(arm, x, ys); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// fitArm solves (ΦcᵀΦc + λI)β = Φcᵀ(y − ȳ) on the centred features Φc.
func (t *TLearner) fitArm(arm int, x *mat.Dense, y []float64) error {
	phi := t.features(x)
	n, p := phi.Dims()
	mean := mat.NewVecDense(p, nil)
	for j := range p {
		var s float64
		for i := range n {
			s += phi.At(i, j)
		}
		mean.SetVec(j, s/float64(n))
	}
	var ybar float64
	for _, v := range y {
		ybar += v / float64(n)
	}
	yc := mat.NewVecDense(n, nil)
	for i := range n {
		row := phi.RawRowView(i)
		for j := range row {
			row[j] -= mean.AtVec(j)
		}
		yc.SetVec(i, y[i]-ybar)
	}
	gram := mat.NewSymDense(p, nil)
	gram.SymOuterK(1, phi.T())
	for j := range p {
		gram.SetSym(j, j, gram.At(j, j)+TLearnerRidge)
	}
	var chol mat.Cholesky
	if !chol.Factorize(gram) {
		return errors.New("estimator: t-learner: ridge system is not positive definite")
	}
	var rhs, beta mat.VecDense
	rhs.MulVec(phi.T(), yc)
	if err := chol.SolveVecTo(&beta, &rhs); err != nil {
		return fmt.Errorf("estimator: t-learner: %w", err)
	}
	t.beta[arm], t.fmean[arm], t.ymean[arm] = &beta, mean, ybar
	return nil
}

func (t *TLearner) features(x *mat.Dense) *mat.Dense {
	return t.fm.Map(nil, t.scaler.standardizeX(x), t.a)
}

// CATE returns f₁(x) − f₀(x) for every row of d (only d.X is read).
func (t *TLearner) CATE(d *Data) ([]float64, error) {
	if d == nil || d.X == nil {
		return nil, errors.New("estimator: nil data")
	}
	if _, dx := d.X.Dims(); dx != t.fm.In() {
		return nil, fmt.Errorf("estimator: %d covariates, want %d", dx, t.fm.In())
	}
	phi := t.features(d.X)
	n, _ := phi.Dims()
	out := make([]float64, n)
	for i := range n {
		row := mat.NewVecDense(len(phi.RawRowView(i)), phi.RawRowView(i))
		var f [2]float64
		for arm := range 2 {
			f[arm] = t.ymean[arm] + mat.Dot(row, t.beta[arm]) - mat.Dot(t.fmean[arm], t.beta[arm])
		}
		out[i] = f[1] - f[0]
	}
	return out, nil
}
