package estimator

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Kind names one of the three models of CausalRFF.
type Kind int

const (
	// Propensity is p(w|x): logit φ(x)ᵀW_psi.
	Propensity Kind = iota
	// Outcome is p(y|x,w): mean (1−w)φ(x)ᵀW_beta0 + wφ(x)ᵀW_beta1.
	Outcome
	// Latent is the VAE over z: encoder q0, q1 (q alone for a binary
	// outcome; see Setup.EncodesOutcome) and decoder y0, y1, w, x.
	Latent
)

// Kinds lists the models in training order.
var Kinds = []Kind{Propensity, Outcome, Latent}

// String returns the model's name.
func (k Kind) String() string {
	switch k {
	case Propensity:
		return "propensity"
	case Outcome:
		return "outcome"
	case Latent:
		return "latent"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Block describes one named weight tensor θ_c (and W_c, G_c) of a model.
type Block struct {
	Name       string
	Rows, Cols int // 2D×k
}

// Param describes one named shared parameter vector (a, t, r).
type Param struct {
	Name string
	Size int
}

// layout fixes where every parameter of a model lives in the optimiser's
// flat vector x = [Θ (m×P, row v = site v's blocks in order) | ρ | shared].
type layout struct {
	kind     Kind
	blocks   []Block
	blockOff []int // offset of each block in a site's row of Θ
	P        int   // parameters per site
	zeta     float64

	shared    []Param
	sharedOff []int // offset of each shared parameter inside the shared part
	S         int
	init      []float64 // initial shared values (S)
	zetaS     []float64 // per shared value: penalty ζ·v²
}

func newLayout(kind Kind, s *Setup) *layout {
	cfg := s.Config
	dx := len(s.Schema.Binary)
	l := &layout{kind: kind}
	addShared := func(name string, size int, init, zeta float64) {
		l.shared = append(l.shared, Param{Name: name, Size: size})
		l.sharedOff = append(l.sharedOff, l.S)
		l.S += size
		for range size {
			l.init = append(l.init, init)
			l.zetaS = append(l.zetaS, zeta)
		}
	}
	switch kind {
	case Propensity:
		l.blocks = []Block{{"psi", s.Maps[mapPropensity].Out(), 1}}
		l.zeta = cfg.ZetaPropensity
		addShared("a", 1, s.initLogScale(dx), 0)
	case Outcome:
		f := s.Maps[mapOutcome].Out()
		l.blocks = []Block{{"beta0", f, 1}, {"beta1", f, 1}}
		l.zeta = cfg.ZetaOutcome
		addShared("a", 1, s.initLogScale(dx), 0)
		if !s.Schema.BinaryOutcome {
			t0 := math.Log(s.yRawSD() / s.yScale())
			addShared("t", 1, t0, cfg.ZetaT)
		}
	case Latent:
		dz := cfg.Latent
		fq, fz := s.Maps[mapEncoder].Out(), s.Maps[mapDecoder].Out()
		if s.EncodesOutcome() {
			l.blocks = []Block{{"q0", fq, dz}, {"q1", fq, dz}}
		} else {
			l.blocks = []Block{{"q", fq, dz}}
		}
		l.blocks = append(l.blocks, Block{"y0", fz, 1}, Block{"y1", fz, 1}, Block{"w", fz, 1}, Block{"x", fz, dx})
		l.zeta = cfg.ZetaLatent
		addShared("a_q", 1, s.initLogScale(s.encoderIn()), 0)
		addShared("a_z", 1, s.initLogScale(dz), 0)
		addShared("r", dz, cfg.InitLogSD, 0)
		if !s.Schema.BinaryOutcome {
			addShared("t", 1, math.Log(s.yRawSD()/s.yScale()), cfg.ZetaT)
		}
	}
	for _, b := range l.blocks {
		l.blockOff = append(l.blockOff, l.P)
		l.P += b.Rows * b.Cols
	}
	return l
}

// Blocks returns the weight blocks of model kind under setup s, in the
// order of the flat parameter layout.
func (s *Setup) Blocks(kind Kind) []Block { return append([]Block(nil), newLayout(kind, s).blocks...) }

// SharedParams returns the shared parameters of model kind under setup s.
func (s *Setup) SharedParams(kind Kind) []Param {
	return append([]Param(nil), newLayout(kind, s).shared...)
}

// pairs returns the number of site pairs m(m−1)/2, the length of ρ.
func pairs(m int) int { return m * (m - 1) / 2 }

// pairIndex returns the index of ρ_sv (= ρ_vs) for s ≠ v.
func pairIndex(m, s, v int) int {
	if s > v {
		s, v = v, s
	}
	return s*m - s*(s+1)/2 + v - s - 1
}

func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

// softplus returns log(1+eˣ) without overflow.
func softplus(x float64) float64 {
	if x > 0 {
		return x + math.Log1p(math.Exp(-x))
	}
	return math.Log1p(math.Exp(x))
}

// fillLambda writes the m×m transfer matrix Λ (Λ_ss = 1, Λ_sv = λ^{s,v})
// into lam. rho holds one logit per pair and is read only for Learned.
func fillLambda(lam *mat.Dense, mode Transfer, rho []float64) {
	m, _ := lam.Dims()
	for s := range m {
		for v := range m {
			var l float64
			switch {
			case s == v:
				l = 1
			case mode == FullTransfer:
				l = 1
			case mode == Learned:
				l = sigmoid(rho[pairIndex(m, s, v)])
			}
			lam.Set(s, v, l)
		}
	}
}

// blockView returns block b of a site's parameter row as a Rows×Cols matrix
// sharing row's storage.
func (l *layout) blockView(row []float64, b int) *mat.Dense {
	blk := l.blocks[b]
	off := l.blockOff[b]
	return mat.NewDense(blk.Rows, blk.Cols, row[off:off+blk.Rows*blk.Cols])
}
