package estimator

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/privacy"
)

// attackRows is the site size of the reconstruction attack.
const attackRows = 20

// reconstruct plays a malicious coordinator against site: it asks for the
// outcome model's gradient at rounds rounds with chosen weights (β = 0,
// t = 0, log-scale a) under a configuration of its choosing (mini-batches
// of one row, which it can place, since it knows the seed that draws
// them), and solves each answer for that row's (x, y), in the model's
// standardised units. With β = 0 and t = 0 the answer for row i, of arm w,
// is u·φ(x_i) in block β_w, with u = −n·c_i·y_i (c_i the row's clip
// factor), and n·c_i·(1 − y_i²) for t: the linear features give u·γ'·x_i,
// each frequency's cosine and sine pair has norm |u|/√D, the pair's angle
// fixes the sign of u, and the ratio of the t gradient to u is
// (y_i² − 1)/y_i, which fixes y_i whatever c_i is. Answers for the same row
// are averaged. It returns the guesses, n×(dx+1), rows in prepared order,
// each coordinate clamped to ±3: a row more than three pooled standard
// deviations out is not a guess an attacker would keep.
func reconstruct(t *testing.T, site *Site, rounds int) *mat.Dense {
	t.Helper()
	setup := site.setup
	lay := newLayout(Outcome, setup)
	fm := setup.Maps[mapOutcome]
	dx := fm.In()
	_, D := fm.Omega0.Dims()
	lin := fm.linScale()
	const a = -1.0
	in := &SiteInput{Model: Outcome, Weights: map[string]*mat.Dense{}, Shared: map[string][]float64{"a": {a}, "t": {0}}}
	for _, b := range lay.blocks {
		in.Weights[b.Name] = mat.NewDense(b.Rows, b.Cols, nil)
	}
	sums := mat.NewDense(site.n, 2*D+dx+1, nil) // per row: the block's answer, then the t gradient
	seen := make([]float64, site.n)
	ctx := context.Background()
	for r := range rounds {
		in.Round = r
		out, err := site.Compute(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		var k int
		switch {
		case site.priv == nil || site.priv.rate() == 1:
			k = site.bt.idx[0] // the coordinator draws the same permutation from the seed
		case len(site.sample) == 1:
			// A private site's sample is drawn by coins the coordinator
			// cannot predict; this attacker is told the sample, and uses
			// the rounds of one row.
			k = site.sample[0]
		default:
			continue
		}
		block := "beta1"
		if k < site.n0 {
			block = "beta0"
		}
		row := sums.RawRowView(k)
		for j, v := range out.Grads[block].RawMatrix().Data {
			row[j] += v
		}
		row[2*D+dx] += out.Shared["t"][0]
		seen[k]++
	}
	guess := mat.NewDense(site.n, dx+1, nil)
	om := fm.Omega0
	for k := range site.n {
		if seen[k] == 0 {
			continue
		}
		g := sums.RawRowView(k)
		for j := range g {
			g[j] /= seen[k]
		}
		var abs float64
		for j := range D {
			abs += math.Hypot(g[j], g[D+j])
		}
		abs *= math.Sqrt(float64(D)) / float64(D)
		x := make([]float64, dx)
		for j := range dx {
			x[j] = g[2*D+j] / (abs * lin)
		}
		// Score u > 0 (x as is) against u < 0 (x negated, angles turned by π).
		var score float64
		for j := range D {
			var pre float64
			for c := range dx {
				pre += x[c] * om.At(c, j)
			}
			score += math.Cos(math.Exp(a)*pre - math.Atan2(g[D+j], g[j]))
		}
		u := abs
		if score < 0 {
			u = -abs
			for j := range x {
				x[j] = -x[j]
			}
		}
		rho := g[2*D+dx] / u
		y := (rho - math.Sqrt(rho*rho+4)) / 2 // the root of y² − ρy − 1 of the sign of −u
		if u < 0 {
			y = (rho + math.Sqrt(rho*rho+4)) / 2
		}
		for j, v := range append(x, y) {
			guess.Set(k, j, math.Max(-3, math.Min(3, v)))
		}
	}
	return guess
}

// rmse is the root mean squared distance between the guesses and the
// site's rows, (x, y) in standardised units.
func rmse(site *Site, guess *mat.Dense) float64 {
	site.prepare()
	var ss float64
	for k := range site.n {
		for j, v := range append(append([]float64(nil), site.x.RawRowView(k)...), site.y[k]) {
			d := guess.At(k, j) - v
			ss += d * d
		}
	}
	return math.Sqrt(ss / float64(site.n))
}

// TestChosenWeightsAttack: a coordinator that chooses the configuration
// (mini-batches of one row) and the weights reconstructs every row of a
// 20-row site from exact answers, and from clipped ones when it is told
// which rows each round sampled (clipping alone scales a row's answer,
// which the attack divides out). Under the site's privacy at ε = 1,
// δ = 1e-5 over the run's rounds, Poisson samples of rate 1/20 charged as
// such, its guesses are no better than guessing every row at the pooled
// mean, which is all the pooled moments tell it, although it is still
// told the samples. (A site daemon refuses such batches; see
// federation's site limits. The attack runs here on the estimator's Site
// to show what the noise, not the limit, protects.)
func TestChosenWeightsAttack(t *testing.T) {
	const rounds = 100 // the outcome model's rounds: five answers per row
	cfg := gradConfig(Learned)
	cfg.Method, cfg.Features, cfg.Linear, cfg.BatchSize, cfg.Rounds = Adam, 16, 1, 1, rounds
	schema := Schema{Binary: []bool{false, false}}
	_, sites, _ := toyFederation(t, 1, attackRows, schema, cfg)
	site := sites[0]

	// Guessing every row at the pooled mean: in standardised units the
	// mean is 0.
	base := rmse(site, mat.NewDense(attackRows, len(schema.Binary)+1, nil))

	exact := rmse(site, reconstruct(t, site, rounds))
	if exact > 1e-6 {
		t.Errorf("exact answers: reconstruction error %.3g, want the rows themselves (pooled-mean guess %.3f)", exact, base)
	}
	// A private site samples each row with probability q = 1/n, the
	// batch of one row the attacker asked for; over enough rounds every
	// row is sampled alone at some of them.
	const q = 1.0 / attackRows
	if err := site.SetPrivacy(&Privacy{Clip: 0.1, Rate: q, Key: [32]byte{1}}); err != nil {
		t.Fatal(err)
	}
	clipped := rmse(site, reconstruct(t, site, 8*rounds))
	if clipped > 1e-6 {
		t.Errorf("clipped answers without noise: reconstruction error %.3g, want the rows themselves", clipped)
	}

	// The budget covers the run: three models of `rounds` rounds each,
	// each round a Poisson sample of rate q.
	sigma, err := privacy.Calibrate(1, 1e-5, q, 3*rounds)
	if err != nil {
		t.Fatal(err)
	}
	var worst float64 = math.Inf(1)
	for rep := range 5 {
		if err := site.SetPrivacy(&Privacy{Clip: 1, Noise: sigma, Rate: q, Rand: rand.New(rand.NewPCG(11, uint64(rep)))}); err != nil {
			t.Fatal(err)
		}
		worst = math.Min(worst, rmse(site, reconstruct(t, site, rounds)))
	}
	t.Logf("reconstruction error: exact %.2g, clipped %.2g, ε = 1 (σ = %.1f) at best of 5 runs %.3f; pooled-mean guess %.3f", exact, clipped, sigma, worst, base)
	if worst < 0.9*base {
		t.Errorf("at ε = 1 the attack's error %.3f is below 90%% of the pooled-mean guess's %.3f", worst, base)
	}
}
