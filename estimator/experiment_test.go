package estimator

import (
	"context"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// outcomeMeans returns the outcome model's μ0, μ1 of site s at data's rows,
// in the outcome's original units.
func outcomeMeans(m *Model, s int, d *Data) (mu0, mu1 []float64) {
	nu, err := m.Nuisance(s, d)
	if err != nil {
		panic(err)
	}
	return nu.Mu0, nu.Mu1
}

// expResult holds one fit's errors for TestExperiment.
type expResult struct {
	rep, k                  int
	peheLat, ateLat, valLat float64
	peheOut, ateOut, valOut float64
	peheAvg, ateAvg         float64
	rounds                  [3]int
}

func runExp(t *testing.T, rep, k int, cfg Config) expResult {
	d := readIHDP(t, rep)
	schema := ihdpSchema(d)
	sites := make([]*Data, k)
	for s := range k {
		sites[s], _ = d.subset(s*ihdpSource, s*ihdpSource+ihdpTrain)
	}
	ctx := context.Background()
	model, err := Fit(ctx, sites, schema, GaussianSpectral{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	test, tau := d.subset(ihdpTrain, ihdpTrain+ihdpTest)
	eff, err := model.Effects(ctx, 0, test)
	if err != nil {
		t.Fatal(err)
	}
	r := expResult{rep: rep, k: k}
	r.peheLat, _ = SqrtPEHE(eff.CATE, tau)
	r.ateLat, _ = ATEError(eff.CATE, tau)
	m0, m1 := outcomeMeans(model, 0, test)
	co := make([]float64, len(m0))
	ca := make([]float64, len(m0))
	for i := range co {
		co[i] = m1[i] - m0[i]
		ca[i] = 0.5 * (co[i] + eff.CATE[i])
	}
	r.peheOut, _ = SqrtPEHE(co, tau)
	r.ateOut, _ = ATEError(co, tau)
	r.peheAvg, _ = SqrtPEHE(ca, tau)
	r.ateAvg, _ = ATEError(ca, tau)
	for i, tr := range []*Trained{model.Propensity, model.Outcome, model.Latent} {
		r.rounds[i] = tr.Rounds
	}
	var seL, seO float64
	var nv int
	for s := range k {
		val, _ := d.subset(s*ihdpSource+ihdpTrain+ihdpTest, (s+1)*ihdpSource)
		e, err := model.Effects(ctx, s, val)
		if err != nil {
			t.Fatal(err)
		}
		o0, o1 := outcomeMeans(model, s, val)
		for i := range val.Rows() {
			pl, po := e.Y0[i], o0[i]
			if val.W[i] == 1 {
				pl, po = e.Y1[i], o1[i]
			}
			seL += (pl - val.Y[i]) * (pl - val.Y[i])
			seO += (po - val.Y[i]) * (po - val.Y[i])
			nv++
		}
	}
	r.valLat = math.Sqrt(seL / float64(nv))
	r.valOut = math.Sqrt(seO / float64(nv))
	return r
}

func envInts(name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

func envFloat(name string, def float64) float64 {
	if v := os.Getenv(name); v != "" {
		f, _ := strconv.ParseFloat(v, 64)
		return f
	}
	return def
}

// TestExperiment is the tuning harness behind DefaultConfig: it fits IHDP
// replicates with settings from X_* environment variables and logs, per
// replicate, the test √PEHE and ATE error of the latent-path CATE, of the
// outcome model's f_β1 − f_β0 and of their average, with each path's
// factual error on the validation rows (the only figure used to choose).
//
//	CRFFD_EXPERIMENT=1 X_KS=3 X_LIN=2 go test -run TestExperiment -v ./estimator/
//
// X_TR and X_M take the numeric values of Transfer and Method.
func TestExperiment(t *testing.T) {
	if os.Getenv("CRFFD_EXPERIMENT") == "" {
		t.Skip("experiment")
	}
	cfg := DefaultConfig()
	cfg.Features = int(envFloat("X_D", float64(cfg.Features)))
	cfg.Latent = int(envFloat("X_DZ", float64(cfg.Latent)))
	cfg.ZetaOutcome = envFloat("X_ZO", cfg.ZetaOutcome)
	cfg.ZetaLatent = envFloat("X_ZL", cfg.ZetaLatent)
	cfg.InitLogScale = envFloat("X_A", cfg.InitLogScale)
	cfg.Rounds = int(envFloat("X_R", float64(cfg.Rounds)))
	cfg.Workers = 1
	cfg.Linear = envFloat("X_LIN", cfg.Linear)
	cfg.LogOutcome = LogOutcome(envFloat("X_LOG", float64(cfg.LogOutcome)))
	cfg.Transfer = Transfer(envFloat("X_TR", float64(cfg.Transfer)))
	cfg.Method = Method(envFloat("X_M", float64(cfg.Method)))
	cfg.LearningRate = envFloat("X_LR", cfg.LearningRate)
	cfg.TransferPrior = envFloat("X_KAPPA", cfg.TransferPrior)
	reps := envInts("X_REPS", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	ks := envInts("X_KS", []int{1, 2, 3})
	for _, k := range ks {
		res := make([]expResult, len(reps))
		var wg sync.WaitGroup
		sem := make(chan struct{}, 2)
		for i, rep := range reps {
			wg.Go(func() {
				sem <- struct{}{}
				res[i] = runExp(t, rep, k, cfg)
				<-sem
			})
		}
		wg.Wait()
		var sum expResult
		for _, r := range res {
			t.Logf("k=%d rep=%2d lat %.3f/%.3f val %.3f | out %.3f/%.3f val %.3f | avg %.3f/%.3f rounds %v", k, r.rep, r.peheLat, r.ateLat, r.valLat, r.peheOut, r.ateOut, r.valOut, r.peheAvg, r.ateAvg, r.rounds)
			sum.peheLat += r.peheLat / float64(len(res))
			sum.ateLat += r.ateLat / float64(len(res))
			sum.valLat += r.valLat / float64(len(res))
			sum.peheOut += r.peheOut / float64(len(res))
			sum.ateOut += r.ateOut / float64(len(res))
			sum.valOut += r.valOut / float64(len(res))
			sum.peheAvg += r.peheAvg / float64(len(res))
			sum.ateAvg += r.ateAvg / float64(len(res))
		}
		t.Logf("k=%d MEAN lat %.3f/%.3f val %.3f | out %.3f/%.3f val %.3f | avg %.3f/%.3f", k, sum.peheLat, sum.ateLat, sum.valLat, sum.peheOut, sum.ateOut, sum.valOut, sum.peheAvg, sum.ateAvg)
	}
}
