package estimator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat"

	"github.com/crffd/crffd/internal/mapped"
	"github.com/crffd/crffd/internal/parallel"
)

// Effects are the estimated effects of the rows of one site, in the
// outcome's original units (probabilities for a binary outcome).
type Effects struct {
	CATE       []float64 // per row: mean of ŷ1 − ŷ0 over the samples
	SD         []float64 // per row: standard deviation of ŷ1 − ŷ0
	Lower      []float64 // per row: 2.5% quantile of ŷ1 − ŷ0
	Upper      []float64 // per row: 97.5% quantile of ŷ1 − ŷ0
	Y0, Y1     []float64 // per row: mean of ŷ0 and ŷ1
	Propensity []float64 // per row: p(w=1|x)
	ATE        float64   // local ATE: mean CATE over the rows
}

// effectChunk is the number of (row, sample) pairs processed together; it
// bounds the memory of scoring many rows. A chunk's encoder features
// (effectChunk × 2D+dx+1) then stay in the core's L2 cache between the
// pass that makes them and the product that reads them: at 4096 they
// filled 14 MB, and scoring took a third longer (BenchmarkEffects).
const effectChunk = 1024

// Effects estimates the effects of data's rows (only data.X is read) with
// site's weights. For each row it draws Config.Samples samples
// w_l ~ p(w|x), y_l ~ p(y|x,w_l), z_l ~ q(z|x,y_l,w_l) (refined by
// Config.MHSteps independence Metropolis–Hastings steps when positive), and
// ŷa_l = f_ya(z_l). For a binary outcome the encoder is q(z|x)
// (Setup.EncodesOutcome), so z_l is drawn from it directly; w_l and y_l
// then serve only in the Metropolis–Hastings target
// p(y_l|w_l,z)p(w_l|z)p(x|z)N(z). The draws of row i come from PCG(Seed,
// mix(streamEffects, site, i)) alone, so results are reproducible and do not
// depend on the other rows scored.
func (m *Model) Effects(ctx context.Context, site int, data *Data) (*Effects, error) {
	if m == nil || m.Propensity == nil || m.Outcome == nil || m.Latent == nil {
		return nil, errors.New("estimator: model is not fitted")
	}
	if site < 0 || site >= len(m.Latent.Weights) || m.Latent.Weights[site] == nil ||
		m.Propensity.Weights[site] == nil || m.Outcome.Weights[site] == nil {
		return nil, fmt.Errorf("estimator: no site %d", site)
	}
	setup := m.Setup
	cfg := setup.Config
	if data == nil || data.X == nil {
		return nil, errors.New("estimator: nil data")
	}
	n, dx := data.X.Dims()
	if dx != len(setup.Schema.Binary) {
		return nil, fmt.Errorf("estimator: %d covariates, want %d", dx, len(setup.Schema.Binary))
	}
	// Per-row results of millions of rows: a one-shot fit keeps them out
	// of its heap (mapped.Use).
	e := &Effects{
		CATE: mapped.Large(n), SD: mapped.Large(n), Lower: mapped.Large(n), Upper: mapped.Large(n),
		Y0: mapped.Large(n), Y1: mapped.Large(n),
	}
	if n == 0 {
		e.Propensity = []float64{}
		return e, nil
	}
	// Propensity and outcome means of every row. Each step standardises
	// the rows it reads a chunk at a time: no standardised copy of every
	// row is made.
	var mu0, mu1 []float64
	e.Propensity, mu0, mu1 = m.nuisanceModelUnits(site, data.X)
	sdY := m.outcomeSD()

	// Chunks of rows are scored on every core, each worker in its own
	// scorer: a row's draws are keyed by the row alone, and each chunk
	// writes its own rows of e, so the result does not depend on how many
	// workers there are.
	rows := max(1, effectChunk/cfg.Samples)
	chunks := (n + rows - 1) / rows
	workers := min(runtime.GOMAXPROCS(0), chunks)
	pool := make(chan *scorer, workers)
	for range workers {
		pool <- newScorer(m, site, data.X)
	}
	var (
		mu   sync.Mutex
		done int
	)
	parallel.ForEach(chunks, workers, func(c int) {
		if ctx.Err() != nil {
			return
		}
		sc := <-pool
		defer func() { pool <- sc }()
		i0 := c * rows
		i1 := min(n, i0+rows)
		sc.sample(i0, i1, e.Propensity, mu0, mu1, sdY)
		tau := sc.tau
		for i := i0; i < i1; i++ {
			base := (i - i0) * cfg.Samples
			var s0, s1 float64
			for l := range tau {
				y0, y1 := sc.yhat0[base+l], sc.yhat1[base+l]
				s0 += y0
				s1 += y1
				tau[l] = y1 - y0
			}
			nS := float64(cfg.Samples)
			e.Y0[i], e.Y1[i] = s0/nS, s1/nS
			mean, sd := stat.MeanStdDev(tau, nil)
			if cfg.Samples < 2 {
				sd = 0
			}
			e.CATE[i], e.SD[i] = mean, sd
			slices.Sort(tau)
			e.Lower[i] = stat.Quantile(0.025, stat.LinInterp, tau, nil)
			e.Upper[i] = stat.Quantile(0.975, stat.LinInterp, tau, nil)
		}
		mu.Lock()
		done += i1 - i0
		reportScoring(ctx, done, n)
		mu.Unlock()
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e.ATE = stat.Mean(e.CATE, nil)
	return e, nil
}

// scorer holds the workspaces of effect sampling for one chunk of rows.
type scorer struct {
	setup  *Setup
	site   int
	raw    *mat.Dense // n×dx covariates as the rows hold them
	x      *mat.Dense // the chunk's rows of raw, standardised
	preX   *mat.Dense // rows×D: x·Ω_enc[:dx] of the chunk's rows, the y-free part of the encoder input
	omegaY []float64  // D: the encoder frequencies of y; nil when it reads x alone
	u      []float64  // D: one sample's encoder pre-activations, when it reads y
	aq, az float64
	sq     []float64 // dz
	lw     map[string]*mat.Dense

	pcg          []rand.PCG
	rng          []*rand.Rand
	w, y         []float64  // per sample
	eps          *mat.Dense // R×dz
	phiQ         *mat.Dense // R×Out: the encoder features, by arm (see sample), or per row when the encoder reads x alone
	mq           *mat.Dense // R×dz
	z, zp        *mat.Dense // R×dz current and proposed
	preZ         *mat.Dense // R×D
	phiZ         *mat.Dense // R×2D
	wdec         *mat.Dense // 2D×cols: the decoder's y0 and y1 weights, then (Metropolis–Hastings only) w and x
	out          *mat.Dense // R×cols
	gemm         gemm
	logw         []float64 // per sample: log target − log proposal of the current z
	yhat0, yhat1 []float64
	slot         []int      // per sample: its row of phiQ and mqArm
	mqArm        *mat.Dense // R×dz: the encoder means in phiQ's row order
	invVarY      float64    // e^{−2t} of the decoder's y
	sdY          float64    // e^t of the decoder's y, in model units
	tau          []float64  // per sample of one row: ŷ1 − ŷ0
}

func newScorer(m *Model, site int, raw *mat.Dense) *scorer {
	setup := m.Setup
	cfg := setup.Config
	_, dx := raw.Dims()
	R := max(1, effectChunk/cfg.Samples) * cfg.Samples
	D, dz := cfg.Features, cfg.Latent
	enc := setup.Maps[mapEncoder].Omega0
	// The CATE needs only the decoder's outcome columns; the treatment's
	// and the covariates' (all but two of them) enter only the
	// Metropolis–Hastings target.
	cols := decW
	if cfg.MHSteps > 0 {
		cols = decX + dx
	}
	sc := &scorer{
		setup: setup, site: site, raw: raw,
		x:    mat.NewDense(R/cfg.Samples, dx, nil),
		preX: mat.NewDense(R/cfg.Samples, D, nil),
		tau:  make([]float64, cfg.Samples),
		aq:   m.Latent.Shared["a_q"][0],
		az:   m.Latent.Shared["a_z"][0],
		sq:   make([]float64, dz),
		lw:   m.Latent.Weights[site],
		w:    make([]float64, R), y: make([]float64, R),
		eps:   mat.NewDense(R, dz, nil),
		phiQ:  mat.NewDense(R, setup.Maps[mapEncoder].Out(), nil),
		mq:    mat.NewDense(R, dz, nil),
		mqArm: mat.NewDense(R, dz, nil),
		slot:  make([]int, R),
		z:     mat.NewDense(R, dz, nil), zp: mat.NewDense(R, dz, nil),
		preZ:  mat.NewDense(R, D, nil),
		phiZ:  mat.NewDense(R, setup.Maps[mapDecoder].Out(), nil),
		wdec:  mat.NewDense(setup.Maps[mapDecoder].Out(), cols, nil),
		out:   mat.NewDense(R, cols, nil),
		logw:  make([]float64, R),
		yhat0: make([]float64, R), yhat1: make([]float64, R),
	}
	if t, ok := m.Latent.Shared["t"]; ok {
		sc.invVarY = math.Exp(-2 * t[0])
		sc.sdY = math.Exp(t[0])
	}
	if setup.EncodesOutcome() {
		sc.omegaY = mat.Row(nil, dx, enc)
		sc.u = make([]float64, D)
	}
	for k, r := range m.Latent.Shared["r"] {
		sc.sq[k] = math.Exp(r)
	}
	setCols(sc.wdec, decY0, sc.lw["y0"])
	setCols(sc.wdec, decY1, sc.lw["y1"])
	if cols > decW {
		setCols(sc.wdec, decW, sc.lw["w"])
		setCols(sc.wdec, decX, sc.lw["x"])
	}
	rows := R / cfg.Samples
	sc.pcg = make([]rand.PCG, rows)
	sc.rng = make([]*rand.Rand, rows)
	for i := range rows {
		sc.rng[i] = rand.New(&sc.pcg[i])
	}
	return sc
}

// sample fills yhat0 and yhat1 (model units mapped back to outcome units)
// for every sample of rows [i0, i1).
func (sc *scorer) sample(i0, i1 int, prop, mu0, mu1 []float64, sdY float64) {
	cfg := sc.setup.Config
	N, dz, D := cfg.Samples, cfg.Latent, cfg.Features
	binaryY := sc.setup.Schema.BinaryOutcome
	R := (i1 - i0) * N
	scale := math.Exp(sc.aq)
	c := 1 / math.Sqrt(float64(D))
	lin := sc.setup.Maps[mapEncoder].linScale()
	n0, n1 := 0, 0 // samples of each arm
	enc := sc.setup.Maps[mapEncoder].Omega0
	_, dx := sc.x.Dims()
	for i := i0; i < i1; i++ {
		sc.setup.Scaler.standardizeRow(sc.x.RawRowView(i-i0), sc.raw.RawRowView(i))
	}
	sc.gemm.mul(view(sc.preX).block(0, i1-i0, 0, D), view(sc.x).block(0, i1-i0, 0, dx), view(enc).block(0, dx, 0, D))
	for i := i0; i < i1; i++ {
		r := i - i0
		sc.pcg[r].Seed(cfg.Seed, mix(streamEffects, uint64(sc.site), uint64(i)))
		rng := sc.rng[r]
		px := sc.preX.RawRowView(r)
		for l := range N {
			k := r*N + l
			w := 0.0
			if rng.Float64() < prop[i] {
				w = 1
			}
			mu := mu0[i]
			if w == 1 {
				mu = mu1[i]
			}
			var y float64
			switch {
			case binaryY:
				if rng.Float64() < sigmoid(mu) {
					y = 1
				}
			default:
				y = mu + sdY*rng.NormFloat64()
			}
			sc.w[k], sc.y[k] = w, y
			for j := range sc.eps.RawRowView(k) {
				sc.eps.Set(k, j, rng.NormFloat64())
			}
			if sc.omegaY == nil {
				// q(z|x): every sample of the row has the same encoder
				// features, computed once below.
				continue
			}
			// q(z|x,y,w): the samples' features go to the rows of their
			// arm's block of phiQ, controls from the top and treated
			// rows from the bottom, so each block is one product.
			var slot int
			if w == 1 {
				n1++
				slot = R - n1
			} else {
				slot = n0
				n0++
			}
			sc.slot[k] = slot
			row := sc.phiQ.RawRowView(slot)
			for j, p := range px {
				sc.u[j] = p + y*sc.omegaY[j]
			}
			sincosKernel(row[:D], row[D:2*D], sc.u, scale, c)
			if lin > 0 {
				lrow := row[2*D:]
				for j, v := range sc.x.RawRowView(r) {
					lrow[j] = lin * v
				}
				lrow[len(lrow)-1] = lin * y
			}
		}
	}
	phiQ, mqArm := view(sc.phiQ), view(sc.mqArm)
	if sc.omegaY == nil {
		rows := i1 - i0
		for r := range rows {
			row := sc.phiQ.RawRowView(r)
			sincosKernel(row[:D], row[D:2*D], sc.preX.RawRowView(r), scale, c)
			if lin > 0 {
				for j, v := range sc.x.RawRowView(r) {
					row[2*D+j] = lin * v
				}
			}
		}
		sc.gemm.mul(mqArm.block(0, rows, 0, dz), phiQ.block(0, rows, 0, phiQ.cols), view(sc.lw["q"]))
		for k := range R {
			copy(sc.mq.RawRowView(k), sc.mqArm.RawRowView(k/N))
		}
	} else {
		sc.gemm.mul(mqArm.block(0, n0, 0, dz), phiQ.block(0, n0, 0, phiQ.cols), view(sc.lw["q0"]))
		sc.gemm.mul(mqArm.block(R-n1, R, 0, dz), phiQ.block(R-n1, R, 0, phiQ.cols), view(sc.lw["q1"]))
		for k := range R {
			copy(sc.mq.RawRowView(k), sc.mqArm.RawRowView(sc.slot[k]))
		}
	}
	z := sc.z.Slice(0, R, 0, dz).(*mat.Dense)
	for k := range R {
		zr, mr, er := sc.z.RawRowView(k), sc.mq.RawRowView(k), sc.eps.RawRowView(k)
		for j := range zr {
			zr[j] = mr[j] + sc.sq[j]*er[j]
		}
	}
	if cfg.MHSteps > 0 {
		sc.metropolis(R)
	}
	sc.decode(z, R)
	for k := range R {
		o := sc.out.RawRowView(k)
		y0, y1 := o[decY0], o[decY1]
		sc.yhat0[k], sc.yhat1[k] = sc.setup.yMean(y0, sc.sdY), sc.setup.yMean(y1, sc.sdY)
	}
}

// decode fills the first R rows of out with the decoder outputs at z.
func (sc *scorer) decode(z *mat.Dense, R int) {
	D := sc.setup.Config.Features
	fm := sc.setup.Maps[mapDecoder]
	preZ := sc.preZ.Slice(0, R, 0, D).(*mat.Dense)
	phiZ := sc.phiZ.Slice(0, R, 0, fm.Out()).(*mat.Dense)
	sc.gemm.mul(view(preZ), view(z), view(fm.Omega0))
	mapRows(phiZ, preZ, math.Exp(sc.az), D)
	setLinear(phiZ, z, fm.linScale(), D)
	_, c := sc.out.Dims()
	if c == 2 {
		sc.gemm.mulTwoCols(view(sc.out).block(0, R, 0, c), view(phiZ), view(sc.wdec))
		return
	}
	sc.gemm.mul(view(sc.out).block(0, R, 0, c), view(phiZ), view(sc.wdec))
}

// logWeight returns log p(y,w,x|z) + log N(z;0,I) − log q(z) of sample k
// from the decoder outputs in out, up to constants shared by all z.
func (sc *scorer) logWeight(k, row int, z, mq []float64) float64 {
	o := sc.out.RawRowView(k)
	arm := decY0
	if sc.w[k] == 1 {
		arm = decY1
	}
	var l float64
	if sc.setup.Schema.BinaryOutcome {
		l, _ = nllTerm(o[arm], sc.y[k], true)
	} else {
		r := sc.y[k] - o[arm]
		l = 0.5 * r * r * sc.invVarY
	}
	lw, _ := nllTerm(o[decW], sc.w[k], true)
	l += lw
	xr := sc.x.RawRowView(row)
	for c, b := range sc.setup.Schema.Binary {
		lx, _ := nllTerm(o[decX+c], xr[c], b)
		l += lx
	}
	for j, v := range z {
		d := (v - mq[j]) / sc.sq[j]
		l += 0.5*v*v - 0.5*d*d
	}
	return -l
}

// metropolis runs independence Metropolis–Hastings with proposal q and
// target p(y|w,z)p(w|z)p(x|z)N(z;0,I), starting from the q draw in z.
func (sc *scorer) metropolis(R int) {
	cfg := sc.setup.Config
	N, dz := cfg.Samples, cfg.Latent
	z := sc.z.Slice(0, R, 0, dz).(*mat.Dense)
	zp := sc.zp.Slice(0, R, 0, dz).(*mat.Dense)
	sc.decode(z, R)
	for k := range R {
		sc.logw[k] = sc.logWeight(k, k/N, sc.z.RawRowView(k), sc.mq.RawRowView(k))
	}
	for range cfg.MHSteps {
		for k := range R {
			rng := sc.rng[k/N]
			zr, mr := sc.zp.RawRowView(k), sc.mq.RawRowView(k)
			for j := range zr {
				zr[j] = mr[j] + sc.sq[j]*rng.NormFloat64()
			}
		}
		sc.decode(zp, R)
		for k := range R {
			rng := sc.rng[k/N]
			lw := sc.logWeight(k, k/N, sc.zp.RawRowView(k), sc.mq.RawRowView(k))
			if math.Log(rng.Float64()) < lw-sc.logw[k] {
				sc.logw[k] = lw
				copy(sc.z.RawRowView(k), sc.zp.RawRowView(k))
			}
		}
	}
}
