package estimator_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/crffd/crffd/estimator"
	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat/distuv"
)

// simulate draws n rows with two continuous covariates, a confounded
// treatment and a true effect of 2.
func simulate(n int, seed uint64) *estimator.Data {
	src := rand.NewPCG(seed, 1)
	norm := distuv.Normal{Mu: 0, Sigma: 1, Src: src}
	rng := rand.New(src)
	d := &estimator.Data{X: mat.NewDense(n, 2, nil), W: make([]float64, n), Y: make([]float64, n)}
	for i := range n {
		x0, x1 := norm.Rand(), norm.Rand()
		d.X.Set(i, 0, x0)
		d.X.Set(i, 1, x1)
		if rng.Float64() < 1/(1+math.Exp(-x0)) {
			d.W[i] = 1
		}
		d.Y[i] = x0 + 0.5*x1 + 2*d.W[i] + 0.3*norm.Rand()
	}
	return d
}

// ExampleFit fits CausalRFF on two sites by simulated federation and scores
// the first site's rows.
func ExampleFit() {
	sites := []*estimator.Data{simulate(100, 1), simulate(100, 2)}
	schema := estimator.Schema{Binary: []bool{false, false}}
	cfg := estimator.DefaultConfig()
	cfg.Features, cfg.Latent, cfg.Samples, cfg.Draws, cfg.Rounds = 40, 4, 50, 2, 100
	cfg.Seed = 1
	model, err := estimator.Fit(context.Background(), sites, schema, estimator.GaussianSpectral{}, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	eff, err := model.Effects(context.Background(), 0, sites[0])
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("local ATE ≈ %.0f over %d rows\n", eff.ATE, len(eff.CATE))
	// Output: local ATE ≈ 2 over 100 rows
}

// ExampleCoordinator runs the federated rounds by hand: this loop is what
// a network layer distributes, sending each SiteInput to its site and each
// SiteOutput back.
func ExampleCoordinator() {
	data := []*estimator.Data{simulate(50, 3), simulate(50, 4), simulate(50, 5)}
	schema := estimator.Schema{Binary: []bool{false, false}}
	cfg := estimator.DefaultConfig()
	cfg.Features, cfg.Rounds = 30, 25
	moments := make([]estimator.Moments, len(data))
	for s, d := range data {
		moments[s] = d.Moments() // the only statistic a site shares before training
	}
	scaler, _ := estimator.NewScaler(schema, moments)
	ctx := context.Background()
	setup, err := estimator.NewSetup(ctx, schema, estimator.GaussianSpectral{}, cfg, scaler)
	if err != nil {
		fmt.Println(err)
		return
	}
	sites := make([]*estimator.Site, len(data))
	for s, d := range data {
		sites[s], _ = estimator.NewSite(s, d, setup)
	}
	coord, _ := estimator.NewCoordinator(estimator.Propensity, len(sites), setup)
	outs := make([]*estimator.SiteOutput, len(sites))
	for !coord.Done() {
		for s, in := range coord.Inputs() {
			outs[s], err = sites[s].Compute(ctx, in) // at site s, on its own rows
			if err != nil {
				fmt.Println(err)
				return
			}
		}
		if _, err := coord.Update(outs); err != nil { // at the coordinator
			fmt.Println(err)
			return
		}
	}
	res := coord.Result()
	fmt.Println("rounds:", res.Rounds <= cfg.Rounds, "λ in (0,1):", res.Lambda.At(0, 1) > 0 && res.Lambda.At(0, 1) < 1)
	// Output: rounds: true λ in (0,1): true
}
