package estimator

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"
)

// ihdpDir is where the shared IHDP replicates live; tests skip without it.
var ihdpDir = filepath.Join("..", "..", "shared", "data", "ihdp")

// ihdpRows is one replicate: 747 rows of w, y, ycf, mu0, mu1, x1..x25.
type ihdpRows struct {
	x        *mat.Dense
	w, y     []float64
	mu0, mu1 []float64
}

func readIHDP(tb testing.TB, rep int) *ihdpRows {
	tb.Helper()
	f, err := os.Open(filepath.Join(ihdpDir, fmt.Sprintf("ihdp_npci_%d.csv", rep)))
	if err != nil {
		tb.Skipf("IHDP data not available: %v", err)
	}
	defer f.Close()
	var rows [][]float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		fields := strings.Split(line, ",")
		if len(fields) != 30 {
			tb.Fatalf("replicate %d: %d fields", rep, len(fields))
		}
		r := make([]float64, 30)
		for j, s := range fields {
			if r[j], err = strconv.ParseFloat(strings.TrimSpace(s), 64); err != nil {
				tb.Fatal(err)
			}
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	d := &ihdpRows{x: mat.NewDense(len(rows), 25, nil)}
	for i, r := range rows {
		d.w = append(d.w, r[0])
		d.y = append(d.y, r[1])
		d.mu0 = append(d.mu0, r[3])
		d.mu1 = append(d.mu1, r[4])
		copy(d.x.RawRowView(i), r[5:])
	}
	return d
}

// subset returns rows [lo, hi) as Data and the true CATEs.
func (d *ihdpRows) subset(lo, hi int) (*Data, []float64) {
	out := &Data{X: mat.DenseCopyOf(d.x.Slice(lo, hi, 0, 25)), W: append([]float64(nil), d.w[lo:hi]...), Y: append([]float64(nil), d.y[lo:hi]...)}
	tau := make([]float64, hi-lo)
	for i := range tau {
		tau[i] = d.mu1[lo+i] - d.mu0[lo+i]
	}
	return out, tau
}

// ihdpSchema marks a column binary when all its values are 0 or 1; x14,
// which also takes the value 2, is then treated as continuous (a count).
func ihdpSchema(d *ihdpRows) Schema {
	n, dx := d.x.Dims()
	s := Schema{Binary: make([]bool, dx)}
	for j := range dx {
		s.Binary[j] = true
		for i := range n {
			if v := d.x.At(i, j); v != 0 && v != 1 {
				s.Binary[j] = false
				break
			}
		}
	}
	return s
}

// IHDP split of the paper: sources of 249 rows; inside each, 50 train,
// 100 test, 99 validation.
const (
	ihdpSource = 249
	ihdpTrain  = 50
	ihdpTest   = 100
)

type ihdpResult struct {
	pehe, ate, valRMSE float64
	rounds             [3]int
	elapsed            time.Duration
}

// runIHDP trains on the training rows of the first k sources of replicate
// rep and scores the test rows of source 1. valRMSE is the factual-outcome
// prediction error on the validation rows of the training sources, the only
// quantity used to choose hyperparameters.
func runIHDP(tb testing.TB, rep, k int, cfg Config) ihdpResult {
	d := readIHDP(tb, rep)
	schema := ihdpSchema(d)
	sites := make([]*Data, k)
	for s := range k {
		sites[s], _ = d.subset(s*ihdpSource, s*ihdpSource+ihdpTrain)
	}
	start := time.Now()
	ctx := context.Background()
	model, err := Fit(ctx, sites, schema, GaussianSpectral{}, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	test, tau := d.subset(ihdpTrain, ihdpTrain+ihdpTest)
	eff, err := model.Effects(ctx, 0, test)
	if err != nil {
		tb.Fatal(err)
	}
	res := ihdpResult{elapsed: time.Since(start)}
	res.pehe, _ = SqrtPEHE(eff.CATE, tau)
	res.ate, _ = ATEError(eff.CATE, tau)
	for i, t := range []*Trained{model.Propensity, model.Outcome, model.Latent} {
		res.rounds[i] = t.Rounds
	}
	var se float64
	var nv int
	for s := range k {
		val, _ := d.subset(s*ihdpSource+ihdpTrain+ihdpTest, (s+1)*ihdpSource)
		e, err := model.Effects(ctx, s, val)
		if err != nil {
			tb.Fatal(err)
		}
		sse, n, err := FactualSSE(e, val)
		if err != nil {
			tb.Fatal(err)
		}
		se += sse
		nv += n
	}
	res.valRMSE = math.Sqrt(se / float64(nv))
	return res
}

// TestIHDPAccuracy checks the acceptance figures: means over
// replicates 1..10 of √PEHE and ATE error on the test rows of source 1.
//
// It trains 30 models, so it runs only when CRFFD_ACCEPTANCE is set:
//
//	CRFFD_ACCEPTANCE=1 go test -run TestIHDPAccuracy -v -timeout 30m ./estimator/
func TestIHDPAccuracy(t *testing.T) {
	skipUnlessAcceptance(t)
	readIHDP(t, 1)
	limits := []struct{ pehe, ate float64 }{{1.7, 0.7}, {1.4, 0.7}, {1.2, 0.5}}
	cfg := DefaultConfig()
	for k := 1; k <= 3; k++ {
		var pehe, ate, val float64
		var elapsed time.Duration
		for rep := 1; rep <= 10; rep++ {
			r := runIHDP(t, rep, k, cfg)
			pehe += r.pehe / 10
			ate += r.ate / 10
			val += r.valRMSE / 10
			elapsed += r.elapsed
			t.Logf("k=%d rep=%2d sqrtPEHE=%.3f ATEerr=%.3f valRMSE=%.3f rounds=%v %v", k, rep, r.pehe, r.ate, r.valRMSE, r.rounds, r.elapsed.Round(time.Millisecond))
		}
		t.Logf("k=%d mean sqrtPEHE=%.3f ATEerr=%.3f valRMSE=%.3f time=%v", k, pehe, ate, val, elapsed.Round(time.Millisecond))
		if pehe > limits[k-1].pehe || ate > limits[k-1].ate {
			t.Errorf("k=%d: sqrtPEHE %.3f (limit %.1f), ATE error %.3f (limit %.1f)", k, pehe, limits[k-1].pehe, ate, limits[k-1].ate)
		}
	}
}

// skipUnlessAcceptance skips the slow acceptance checks of issue 3 unless
// CRFFD_ACCEPTANCE is set, so that the default test run stays short.
func skipUnlessAcceptance(t *testing.T) {
	t.Helper()
	if testing.Short() || os.Getenv("CRFFD_ACCEPTANCE") == "" {
		t.Skip("slow acceptance check: set CRFFD_ACCEPTANCE=1 to run")
	}
}
