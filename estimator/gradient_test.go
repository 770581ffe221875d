package estimator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

const gradTol = 1e-5

func gradConfig(mode Transfer) Config {
	cfg := DefaultConfig()
	cfg.Features = 6
	cfg.Latent = 3
	cfg.Draws = 2
	cfg.ZetaPropensity, cfg.ZetaOutcome, cfg.ZetaLatent, cfg.ZetaT = 0.3, 0.2, 0.1, 0.4
	cfg.Transfer = mode
	cfg.TransferPrior = 0.8
	cfg.Seed = 7
	cfg.StandardizeY = true
	return cfg
}

var gradSchemas = []struct {
	name   string
	schema Schema
}{
	{"continuous-y", Schema{Binary: []bool{true, false, true, false}}},
	{"binary-y", Schema{Binary: []bool{false, true, true, false}, BinaryOutcome: true}},
}

// randomInput returns an input of lay's model with standard normal weights
// and shared parameters of scale 0.3.
func randomInput(lay *layout, rng *rand.Rand) *SiteInput {
	in := &SiteInput{Model: lay.kind, Noise: 5, Weights: map[string]*mat.Dense{}, Shared: map[string][]float64{}}
	for _, b := range lay.blocks {
		w := mat.NewDense(b.Rows, b.Cols, nil)
		for i := range b.Rows {
			for j := range b.Cols {
				w.Set(i, j, rng.NormFloat64())
			}
		}
		in.Weights[b.Name] = w
	}
	for _, p := range lay.shared {
		v := make([]float64, p.Size)
		for i := range v {
			v[i] = 0.3 * rng.NormFloat64()
		}
		in.Shared[p.Name] = v
	}
	return in
}

// TestSiteGradients checks G_c^s = ∂J^(s)/∂W_c^s and the shared-parameter
// gradients of every model against central differences at random weights,
// on every row and on a mini-batch of two chunks.
func TestSiteGradients(t *testing.T) {
	for _, sc := range gradSchemas {
		for _, kind := range Kinds {
			for _, c := range []struct {
				lin   float64
				batch int
			}{{0, 0}, {0.7, 0}, {0.7, 4}} {
				lin := c.lin
				t.Run(fmt.Sprintf("%s/%v/linear=%v/batch=%d", sc.name, kind, lin, c.batch), func(t *testing.T) {
					cfg := gradConfig(Learned)
					cfg.Linear = lin
					// With 11 rows in batches of 4, Compute differentiates
					// 11/4 times the objective of round 3's batch, computed
					// in chunks of 3 rows and 1.
					cfg.BatchSize = c.batch
					defer setBatchChunk(3)()
					setup, sites, _ := toyFederation(t, 1, 11, sc.schema, cfg)
					site := sites[0]
					lay := newLayout(kind, setup)
					in := randomInput(lay, rand.New(rand.NewPCG(3, uint64(kind))))
					in.Round = 3
					ctx := context.Background()
					loss := func() float64 {
						out, err := site.Compute(ctx, in)
						if err != nil {
							t.Fatal(err)
						}
						return out.Loss
					}
					out, err := site.Compute(ctx, in)
					if err != nil {
						t.Fatal(err)
					}
					for _, b := range lay.blocks {
						an := append([]float64(nil), out.Grads[b.Name].RawMatrix().Data...)
						fd := centralDiff(loss, in.Weights[b.Name].RawMatrix().Data, 1e-6)
						if e := relErr(an, fd, 1e-8); e > gradTol {
							t.Errorf("block %s: relative error %.3g", b.Name, e)
						}
						// Restore the output for the next block: Compute reuses it.
						if _, err := site.Compute(ctx, in); err != nil {
							t.Fatal(err)
						}
					}
					for _, p := range lay.shared {
						out, _ := site.Compute(ctx, in)
						an := append([]float64(nil), out.Shared[p.Name]...)
						fd := centralDiff(loss, in.Shared[p.Name], 1e-6)
						if e := relErr(an, fd, 1e-8); e > gradTol {
							t.Errorf("shared %s: relative error %.3g (analytic %v, numeric %v)", p.Name, e, an, fd)
						}
					}
				})
			}
		}
	}
}

// TestCoordinatorGradient checks the coordinator's ∂J/∂θ, ∂J/∂ρ and
// ∂J/∂(shared) of the total objective J (all sites plus regularisers),
// assembled from the sites' G, against central differences of J.
func TestCoordinatorGradient(t *testing.T) {
	// Below smallFederation sites the coordinator fuses its passes over θ;
	// from it on it uses whole-matrix products. Both are checked.
	for _, m := range []int{3, smallFederation} {
		for _, sc := range gradSchemas {
			for _, mode := range []Transfer{Learned, NoTransfer, FullTransfer} {
				for _, kind := range Kinds {
					t.Run(fmt.Sprintf("%d sites/%s/%v/%v", m, sc.name, mode, kind), func(t *testing.T) {
						setup, sites, _ := toyFederation(t, m, 7, sc.schema, gradConfig(mode))
						c, err := NewCoordinator(kind, len(sites), setup)
						if err != nil {
							t.Fatal(err)
						}
						x := c.opt.point()
						rng := rand.New(rand.NewPCG(11, uint64(kind)))
						for i := range x {
							x[i] = 0.5 * rng.NormFloat64()
						}
						ctx := context.Background()
						outs := make([]*SiteOutput, len(sites))
						eval := func() float64 {
							ins := c.Inputs()
							for s, site := range sites {
								o, err := site.Compute(ctx, ins[s])
								if err != nil {
									t.Fatal(err)
								}
								outs[s] = o
							}
							if err := c.gather(outs); err != nil {
								t.Fatal(err)
							}
							return c.objective(x, outs)
						}
						eval()
						an := append([]float64(nil), c.grad...)
						fd := centralDiff(eval, x, 1e-6)
						mP := len(sites) * c.lay.P
						parts := []struct {
							name   string
							lo, hi int
						}{
							{"theta", 0, mP},
							{"rho", mP, mP + c.nrho},
							{"shared", mP + c.nrho, len(x)},
						}
						for _, p := range parts {
							if p.lo == p.hi {
								continue
							}
							if e := relErr(an[p.lo:p.hi], fd[p.lo:p.hi], 1e-8); e > gradTol {
								t.Errorf("%s: relative error %.3g", p.name, e)
							}
						}
						if want := m * (m - 1) / 2; mode == Learned && c.nrho != want {
							t.Errorf("got %d transfer logits, want %d", c.nrho, want)
						}
					})
				}
			}
		}
	}
}
