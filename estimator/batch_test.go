package estimator

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// TestBatchesAreUnbiased: over one epoch (n/B rounds), the mean of a
// site's mini-batch outputs, each n/B times its batch's, is the output on
// every row: the batches of an epoch partition the rows when B divides n,
// and the propensity and outcome objectives are sums over rows. (The
// latent model's noise draws follow the rows' places in the batch, so its
// epoch mean equals the full objective only in expectation; its batch
// gradients are checked in TestSiteGradients.)
func TestBatchesAreUnbiased(t *testing.T) {
	const n, b = 12, 3
	defer setBatchChunk(2)() // batches of two chunks, of 2 rows and 1
	for _, sc := range gradSchemas {
		for _, kind := range []Kind{Propensity, Outcome} {
			t.Run(fmt.Sprintf("%s/%v", sc.name, kind), func(t *testing.T) {
				cfg := gradConfig(Learned)
				_, full, _ := toyFederation(t, 1, n, sc.schema, cfg)
				cfg.BatchSize = b
				setup, batched, _ := toyFederation(t, 1, n, sc.schema, cfg)
				in := randomInput(newLayout(kind, setup), rand.New(rand.NewPCG(9, uint64(kind))))
				ctx := context.Background()
				want, err := full[0].Compute(ctx, in)
				if err != nil {
					t.Fatal(err)
				}
				var loss float64
				sum := map[string][]float64{}
				for r := range n / b {
					in.Round = 40 + r // an epoch: rounds 40..43 of 4 per epoch
					out, err := batched[0].Compute(ctx, in)
					if err != nil {
						t.Fatal(err)
					}
					if out.Rows != n {
						t.Errorf("round %d: Rows %d, want %d", in.Round, out.Rows, n)
					}
					loss += out.Loss / (n / b)
					for name, g := range out.Grads {
						acc(sum, name, g.RawMatrix().Data, n/b)
					}
					for name, v := range out.Shared {
						acc(sum, "shared "+name, v, n/b)
					}
				}
				if e := relErr([]float64{loss}, []float64{want.Loss}, 1e-8); e > 1e-12 {
					t.Errorf("mean batch loss %v, full %v", loss, want.Loss)
				}
				// The batched Site read each batch from the rows: it
				// holds no copy of them, where the full one does.
				if b := batched[0]; b.x != nil || b.w != nil || b.y != nil || b.pos != nil || b.col != nil {
					t.Error("a Site of mini-batches holds a copy of its rows")
				}
				if f := full[0]; f.x == nil || f.w == nil {
					t.Error("a Site computing on every row holds no copy of its rows")
				}
				for name, g := range want.Grads {
					if e := relErr(sum[name], g.RawMatrix().Data, 1e-8); e > 1e-12 {
						t.Errorf("gradient %s: relative error %.3g of the epoch mean", name, e)
					}
				}
				for name, v := range want.Shared {
					if e := relErr(sum["shared "+name], v, 1e-8); e > 1e-12 {
						t.Errorf("shared %s: relative error %.3g of the epoch mean", name, e)
					}
				}
			})
		}
	}
}

// acc adds v/k to sum[name].
func acc(sum map[string][]float64, name string, v []float64, k int) {
	if sum[name] == nil {
		sum[name] = make([]float64, len(v))
	}
	for i, x := range v {
		sum[name][i] += x / float64(k)
	}
}

// TestBatchRows: a batch is a function of the seed, the site, the model
// and the round; the batches of an epoch hold distinct rows, all but the
// n mod B left out; successive epochs draw other permutations; and every
// batch is arm-sorted.
func TestBatchRows(t *testing.T) {
	const n, b = 10, 3
	cfg := gradConfig(Learned)
	cfg.BatchSize = b
	_, sites, _ := toyFederation(t, 2, n, gradSchemas[0].schema, cfg)
	_, again, _ := toyFederation(t, 2, n, gradSchemas[0].schema, cfg)
	rows := func(s *Site, kind Kind, round int) []int {
		s.batch(kind, round)
		return slices.Clone(s.bt.idx)
	}
	var epoch0 []int
	for r := range 3 {
		idx := rows(sites[0], Outcome, r)
		if len(idx) != b || !slices.IsSorted(idx) {
			t.Fatalf("round %d: rows %v", r, idx)
		}
		if other := rows(again[0], Outcome, r); !slices.Equal(idx, other) {
			t.Errorf("round %d: rows %v, then %v from the same seed", r, idx, other)
		}
		sub := sites[0].subSite(b, 0)
		sites[0].loadChunk(sub, 0)
		for k := 1; k < b; k++ {
			if sub.w[k] < sub.w[k-1] {
				t.Errorf("round %d: batch not arm-sorted: w %v", r, sub.w)
			}
		}
		epoch0 = append(epoch0, idx...)
	}
	slices.Sort(epoch0)
	if len(slices.Compact(epoch0)) != 9 {
		t.Errorf("epoch 0 batches %v: want 9 distinct rows", epoch0)
	}
	if slices.Equal(rows(sites[0], Outcome, 0), rows(sites[0], Outcome, 3)) &&
		slices.Equal(rows(sites[0], Outcome, 1), rows(sites[0], Outcome, 4)) {
		t.Error("epoch 1 repeats epoch 0's batches")
	}
	if slices.Equal(rows(sites[0], Outcome, 5), rows(sites[1], Outcome, 5)) &&
		slices.Equal(rows(sites[0], Latent, 5), rows(sites[0], Outcome, 5)) {
		t.Error("two sites, or two models, draw the same batches")
	}
}

// TestBatchSizeLeavesSmallSitesAndLBFGSAlone: a site of at most B rows,
// and any site under L-BFGS, computes on every row, bit for bit as
// without mini-batches.
func TestBatchSizeLeavesSmallSitesAndLBFGSAlone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		batch  int
		method Method
	}{{"B = n", 11, Adam}, {"B > n", 50, Adam}, {"L-BFGS", 4, LBFGS}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := gradConfig(Learned)
			cfg.Method = tc.method
			_, full, _ := toyFederation(t, 1, 11, gradSchemas[0].schema, cfg)
			cfg.BatchSize = tc.batch
			setup, batched, _ := toyFederation(t, 1, 11, gradSchemas[0].schema, cfg)
			for _, kind := range Kinds {
				in := randomInput(newLayout(kind, setup), rand.New(rand.NewPCG(4, uint64(kind))))
				in.Round = 7
				a, err := full[0].Compute(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				la := a.Loss
				b, err := batched[0].Compute(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				if b.Loss != la || batched[0].bt != nil {
					t.Errorf("%v: loss %v with B = %d, %v without", kind, b.Loss, tc.batch, la)
				}
			}
		})
	}
}

// TestBatchOutputIgnoresHistory: a round's output is a function of the
// round alone, whatever the site computed before (its workspaces are
// reused from batch to batch), so that a site restarted mid-run, or a
// coordinator resumed from a checkpoint, gets the same gradients.
func TestBatchOutputIgnoresHistory(t *testing.T) {
	for _, sc := range gradSchemas {
		cfg := gradConfig(Learned)
		cfg.BatchSize = 4
		cfg.Linear = 0.7
		setup, a, _ := toyFederation(t, 1, 13, sc.schema, cfg)
		_, b, _ := toyFederation(t, 1, 13, sc.schema, cfg)
		for _, kind := range Kinds {
			in := randomInput(newLayout(kind, setup), rand.New(rand.NewPCG(5, uint64(kind))))
			ctx := context.Background()
			for _, r := range []int{0, 1, 2, 5, 9} {
				in.Round, in.Noise = r, uint64(r)
				if _, err := a[0].Compute(ctx, in); err != nil {
					t.Fatal(err)
				}
			}
			in.Round, in.Noise = 3, 3
			got, err := a[0].Compute(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			gotLoss, gotGrads := got.Loss, cloneGrads(got)
			gotShared := map[string][]float64{}
			for name, v := range got.Shared {
				gotShared[name] = slices.Clone(v)
			}
			want, err := b[0].Compute(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			if gotLoss != want.Loss {
				t.Errorf("%s/%v: round 3's loss %v after other rounds, %v first", sc.name, kind, gotLoss, want.Loss)
			}
			for name, g := range want.Grads {
				if !slices.Equal(gotGrads[name], g.RawMatrix().Data) {
					t.Errorf("%s/%v: round 3's gradient %s depends on the rounds before", sc.name, kind, name)
				}
			}
			for name, v := range want.Shared {
				if !slices.Equal(gotShared[name], v) {
					t.Errorf("%s/%v: round 3's gradient of %s depends on the rounds before: %v, %v first", sc.name, kind, name, gotShared[name], v)
				}
			}
		}
	}
}

// cloneGrads copies out's gradients, which the next Compute overwrites.
func cloneGrads(out *SiteOutput) map[string][]float64 {
	c := map[string][]float64{}
	for name, g := range out.Grads {
		c[name] = slices.Clone(g.RawMatrix().Data)
	}
	return c
}

// setBatchChunk sets batchChunk to c and returns a function that restores
// it.
func setBatchChunk(c int) func() {
	old := batchChunk
	batchChunk = c
	return func() { batchChunk = old }
}

// TestBatchChunksIgnoreCores: a batch split into chunks gives the same
// output, bit for bit, on one core and on several, for every model; and
// for the propensity and outcome models, sums over rows, the same output
// as the batch computed in one piece, up to rounding.
func TestBatchChunksIgnoreCores(t *testing.T) {
	const n, b = 13, 5
	for _, sc := range gradSchemas {
		cfg := gradConfig(Learned)
		cfg.BatchSize = b
		cfg.Linear = 0.7
		setup, whole, _ := toyFederation(t, 1, n, sc.schema, cfg)
		restore := setBatchChunk(2) // chunks of 2, 2 and 1 rows
		_, one, _ := toyFederation(t, 1, n, sc.schema, cfg)
		_, many, _ := toyFederation(t, 1, n, sc.schema, cfg)
		for _, kind := range Kinds {
			in := randomInput(newLayout(kind, setup), rand.New(rand.NewPCG(6, uint64(kind))))
			in.Round, in.Noise = 4, 4
			ctx := context.Background()
			prev := runtime.GOMAXPROCS(1)
			a, err := one[0].Compute(ctx, in)
			runtime.GOMAXPROCS(max(2, prev))
			if err != nil {
				t.Fatal(err)
			}
			got, err := many[0].Compute(ctx, in)
			runtime.GOMAXPROCS(prev)
			if err != nil {
				t.Fatal(err)
			}
			// Chunks of 2, 2 and 1 rows: the two of 2 in the Sites of the
			// workers they ran on, the one of 1 in its own.
			if bt := many[0].bt; len(bt.subs) < 1 || len(bt.subs) > 2 || bt.tail == nil || bt.tail.n != 1 {
				t.Fatalf("%d Sites of full chunks and a tail of %v; want 1 or 2 and one of 1 row", len(bt.subs), bt.tail)
			}
			if a.Loss != got.Loss {
				t.Errorf("%s/%v: loss %v on one core, %v on several", sc.name, kind, a.Loss, got.Loss)
			}
			for name, g := range got.Grads {
				if !slices.Equal(a.Grads[name].RawMatrix().Data, g.RawMatrix().Data) {
					t.Errorf("%s/%v: gradient %s differs between one core and several", sc.name, kind, name)
				}
			}
			if kind == Latent {
				continue
			}
			batchChunk = 1024
			want, err := whole[0].Compute(ctx, in)
			batchChunk = 2
			if err != nil {
				t.Fatal(err)
			}
			if e := relErr([]float64{got.Loss}, []float64{want.Loss}, 1e-8); e > 1e-12 {
				t.Errorf("%s/%v: loss %v in chunks, %v whole", sc.name, kind, got.Loss, want.Loss)
			}
			for name, g := range want.Grads {
				if e := relErr(got.Grads[name].RawMatrix().Data, g.RawMatrix().Data, 1e-8); e > 1e-12 {
					t.Errorf("%s/%v: gradient %s: relative error %.3g between chunks and whole", sc.name, kind, name, e)
				}
			}
		}
		restore()
	}
}

func TestRoundsFor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method Method
		batch  int
		epochs float64
		rows   int
		want   int
	}{
		{"small site", Adam, 4, 1, 4, 10},
		{"few batches", Adam, 4, 1, 30, 10},
		{"an epoch needs more", Adam, 4, 1, 41, 11},
		{"two epochs", Adam, 4, 2, 41, 21},
		{"half an epoch", Adam, 4, 0.5, 100, 13},
		{"epochs off", Adam, 4, 0, 1000, 10},
		{"every row", Adam, 0, 1, 1000, 10},
		{"lbfgs", LBFGS, 4, 1, 1000, 10},
	} {
		cfg := DefaultConfig()
		cfg.Rounds, cfg.Method, cfg.BatchSize, cfg.Epochs = 10, tc.method, tc.batch, tc.epochs
		if got := cfg.RoundsFor(tc.rows); got != tc.want {
			t.Errorf("%s: RoundsFor(%d) = %d, want %d", tc.name, tc.rows, got, tc.want)
		}
	}
	cfg := DefaultConfig()
	cfg.Epochs = math.NaN()
	if err := cfg.validate(); err == nil {
		t.Error("Epochs NaN validates")
	}
}

// TestEpochsExtendTraining: a site of more rows than Rounds batches hold
// trains until every row has been in a batch Epochs times, the progress
// reports that limit, and a coordinator resumed from a checkpoint keeps it.
func TestEpochsExtendTraining(t *testing.T) {
	cfg := gradConfig(Learned)
	cfg.Method, cfg.Rounds, cfg.BatchSize, cfg.Epochs = Adam, 3, 4, 2
	setup, sites, _ := toyFederation(t, 2, 13, gradSchemas[0].schema, cfg) // ⌈2·13/4⌉ = 7 rounds
	var last Progress
	ctx := WithProgress(context.Background(), func(p Progress) { last = p })
	c, err := NewCoordinator(Propensity, 2, setup)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Train(ctx, c, sites, 1)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Rounds != 7 || last.MaxRounds != 7 || last.Round != 7 {
		t.Errorf("trained %d rounds, progress %d of %d; want 7 of 7", tr.Rounds, last.Round, last.MaxRounds)
	}

	c, err = NewCoordinator(Propensity, 2, setup)
	if err != nil {
		t.Fatal(err)
	}
	outs := make([]*SiteOutput, 2)
	for range 4 {
		if err := Round(context.Background(), c, sites, 1, outs); err != nil {
			t.Fatal(err)
		}
	}
	r, err := ResumeCoordinator(setup, c.Checkpoint())
	if err != nil {
		t.Fatal(err)
	}
	if r.Done() || r.MaxRounds() != 7 {
		t.Fatalf("resumed after 4 rounds: done %v, limit %d; want 7", r.Done(), r.MaxRounds())
	}
	rest, err := Train(context.Background(), r, sites, 1)
	if err != nil {
		t.Fatal(err)
	}
	if rest.Rounds != 7 || rest.Loss != tr.Loss || !slices.Equal(rest.Weights[1]["psi"].RawMatrix().Data, tr.Weights[1]["psi"].RawMatrix().Data) {
		t.Errorf("resumed run: %d rounds; want 7 and the parameters of the run without a pause", rest.Rounds)
	}
}
