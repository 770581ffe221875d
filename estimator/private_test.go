package estimator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/floats"
)

// flatOutput returns o's gradients, blocks then shared parameters, in lay's
// order.
func flatOutput(o *SiteOutput, lay *layout) []float64 {
	var v []float64
	for _, b := range lay.blocks {
		v = append(v, o.Grads[b.Name].RawMatrix().Data...)
	}
	for _, p := range lay.shared {
		v = append(v, o.Shared[p.Name]...)
	}
	return v
}

// TestPrivateClipsEachRow: without noise, a private site answers
// (1/q)·Σ_i min(1, C/‖g_i‖)·g_i over the rows its coins sample, with g_i
// the gradient a private site holding row i alone answers (built
// independently, by NewSite on that row, with the same key): at a clip
// norm above every row's norm it is the exact answer, and below it every
// row is scaled to norm C. A row's latent draws are keyed by the row, so
// the latent model is checked as exactly as the others.
func TestPrivateClipsEachRow(t *testing.T) {
	const n = 9
	key := [32]byte{7}
	ctx := context.Background()
	for _, sc := range gradSchemas {
		for _, kind := range Kinds {
			for _, rate := range []float64{0, 0.4} {
				t.Run(fmt.Sprintf("%s/%v/rate=%g", sc.name, kind, rate), func(t *testing.T) {
					cfg := gradConfig(Learned)
					cfg.Method, cfg.Linear = Adam, 0.7
					setup, sites, data := toyFederation(t, 1, n, sc.schema, cfg)
					site := sites[0]
					lay := newLayout(kind, setup)
					in := randomInput(lay, rand.New(rand.NewPCG(3, uint64(kind))))
					in.Round = 5
					if err := site.SetPrivacy(&Privacy{Clip: 1, Rate: rate, Key: key}); err != nil {
						t.Fatal(err)
					}
					var rows []int // original rows of the round, all or the sample's
					for i, p := range site.pos {
						if site.sampled(p, kind, in.Round) {
							rows = append(rows, i)
						}
					}
					if len(rows) == 0 || (rate > 0 && len(rows) == n) {
						t.Fatalf("%d of %d rows sampled at rate %g; pick another round", len(rows), n, rate)
					}
					var alone [][]float64
					var norms []float64
					for _, i := range rows {
						one, err := NewSite(0, data[0].Subset([]int{i}), setup)
						if err != nil {
							t.Fatal(err)
						}
						if err := one.SetPrivacy(&Privacy{Clip: math.Inf(1), Key: key}); err == nil {
							t.Fatal("an infinite clip norm was accepted")
						}
						if err := one.SetPrivacy(&Privacy{Clip: math.MaxFloat64, Key: key}); err != nil {
							t.Fatal(err)
						}
						o, err := one.Compute(ctx, in)
						if err != nil {
							t.Fatal(err)
						}
						alone = append(alone, flatOutput(o, lay))
						norms = append(norms, outputNorm(o, lay))
					}
					scale := 1.0
					if rate > 0 {
						scale = 1 / rate
					}
					for _, c := range []struct {
						name string
						clip float64
					}{{"above every row", 2 * floats.Max(norms)}, {"below every row", 0.5 * floats.Min(norms)}, {"between", (floats.Min(norms) + floats.Max(norms)) / 2}} {
						if err := site.SetPrivacy(&Privacy{Clip: c.clip, Noise: 0, Rate: rate, Key: key}); err != nil {
							t.Fatal(err)
						}
						out, err := site.Compute(ctx, in)
						if err != nil {
							t.Fatal(err)
						}
						if out.Loss != 0 {
							t.Errorf("%s: a private site released its loss %v", c.name, out.Loss)
						}
						got := flatOutput(out, lay)
						want := make([]float64, len(got))
						for r, g := range alone {
							floats.AddScaled(want, scale*math.Min(1, c.clip/norms[r]), g)
						}
						if e := relErr(got, want, 1e-12); e > 1e-10 {
							t.Errorf("%s: relative error %.3g of the clipped sum", c.name, e)
						}
					}
					if err := site.SetPrivacy(nil); err != nil {
						t.Fatal(err)
					}
					exact, err := site.Compute(ctx, in)
					if err != nil {
						t.Fatal(err)
					}
					if exact.Loss == 0 {
						t.Error("SetPrivacy(nil) left the loss withheld")
					}
				})
			}
		}
	}
}

// TestPrivateNoise: the noise added to every coordinate has standard
// deviation Noise·Clip, and a private site's answers differ from round to
// round at the same input.
func TestPrivateNoise(t *testing.T) {
	cfg := gradConfig(Learned)
	cfg.Method, cfg.Features = Adam, 40
	setup, sites, _ := toyFederation(t, 1, 12, gradSchemas[0].schema, cfg)
	lay := newLayout(Latent, setup)
	in := randomInput(lay, rand.New(rand.NewPCG(4, 4)))
	ctx := context.Background()
	const clip, sigma = 0.3, 2.5
	site := sites[0]
	if err := site.SetPrivacy(&Privacy{Clip: clip}); err != nil {
		t.Fatal(err)
	}
	out, err := site.Compute(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	clean := flatOutput(out, lay)
	if err := site.SetPrivacy(&Privacy{Clip: clip, Noise: sigma, Rand: rand.New(rand.NewPCG(8, 8))}); err != nil {
		t.Fatal(err)
	}
	out, err = site.Compute(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	first := flatOutput(out, lay)
	var ss float64
	for j := range first {
		d := first[j] - clean[j]
		ss += d * d
	}
	sd := math.Sqrt(ss / float64(len(first)))
	// Over k coordinates the sample standard deviation is within 4/√(2k)
	// of the truth at about four standard errors.
	if tol := 4 / math.Sqrt(2*float64(len(first))); math.Abs(sd/(sigma*clip)-1) > tol {
		t.Errorf("noise sd %.4f over %d coordinates, want %.4f (±%.0f%%)", sd, len(first), sigma*clip, 100*tol)
	}
	out, err = site.Compute(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if relErr(flatOutput(out, lay), first, 1) == 0 {
		t.Error("two private answers to one input are equal: the noise repeats")
	}
}

// TestSetPrivacyErrors: invalid privacy settings and L-BFGS are refused.
func TestSetPrivacyErrors(t *testing.T) {
	cfg := gradConfig(Learned)
	cfg.Method = Adam
	_, sites, _ := toyFederation(t, 1, 6, gradSchemas[0].schema, cfg)
	cfg.Method = LBFGS
	_, lbfgs, _ := toyFederation(t, 1, 6, gradSchemas[0].schema, cfg)
	for _, c := range []struct {
		name string
		site *Site
		p    Privacy
	}{
		{"zero clip", sites[0], Privacy{Clip: 0, Noise: 1}},
		{"infinite clip", sites[0], Privacy{Clip: math.Inf(1), Noise: 1}},
		{"negative noise", sites[0], Privacy{Clip: 1, Noise: -1}},
		{"NaN noise", sites[0], Privacy{Clip: 1, Noise: math.NaN()}},
		{"lbfgs", lbfgs[0], Privacy{Clip: 1, Noise: 1}},
	} {
		if err := c.site.SetPrivacy(&c.p); !errors.Is(err, ErrPrivacy) {
			t.Errorf("%s: error %v, want ErrPrivacy", c.name, err)
		}
	}
}

// TestNewNoiseSourceDiffers: two noise sources seeded from crypto/rand
// draw different numbers.
func TestNewNoiseSourceDiffers(t *testing.T) {
	a, err := NewNoiseSource()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewNoiseSource()
	if err != nil {
		t.Fatal(err)
	}
	if a.Uint64() == b.Uint64() {
		t.Error("two sources seeded from crypto/rand drew the same number")
	}
}

// TestRowKeysFollowTheRow: a row's key is the same wherever the row sits
// among the site's rows, differs between the copies of a repeated row,
// and changes with the site's secret key.
func TestRowKeysFollowTheRow(t *testing.T) {
	cfg := gradConfig(Learned)
	cfg.Method = Adam
	setup, _, data := toyFederation(t, 1, 8, gradSchemas[0].schema, cfg)
	d := data[0].Subset([]int{0, 1, 2, 3, 4, 5, 6, 7, 3}) // row 3 twice
	keysOf := func(d *Data, key [32]byte) map[uint64]int {
		s, err := NewSite(0, d, setup)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetPrivacy(&Privacy{Clip: 1, Key: key}); err != nil {
			t.Fatal(err)
		}
		out := map[uint64]int{}
		for _, k := range s.rowKeys {
			out[k]++
		}
		return out
	}
	a := keysOf(d, [32]byte{1})
	if len(a) != d.Rows() {
		t.Errorf("%d distinct keys for %d rows: the copies of a repeated row share one", len(a), d.Rows())
	}
	b := keysOf(d.Subset([]int{8, 7, 6, 5, 4, 3, 2, 1, 0}), [32]byte{1})
	for k := range a {
		if b[k] != 1 {
			t.Errorf("key %x of the rows in one order is missing in another", k)
		}
	}
	for k := range keysOf(d, [32]byte{2}) {
		if a[k] != 0 {
			t.Errorf("key %x is the same under another secret", k)
		}
	}
}
