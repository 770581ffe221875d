package selection

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// ErrInput reports inputs that cannot be scored.
var ErrInput = errors.New("selection: invalid input")

// DefaultZ is the number of standard errors of the paired loss
// difference from the best candidate within which a candidate joins the
// ensemble (Combine).
const DefaultZ = 1.0

// Sums are one candidate's loss sums over validation rows: n, Σl, Σl²,
// and Σd, Σd² of the paired differences d = l − l_ref against a reference
// candidate. Pairs.Sums derives them.
type Sums struct {
	N            float64
	Loss, LossSq float64
	Diff, DiffSq float64
	// LossNoise and DiffNoise are the variances of the noise on Loss and
	// Diff (a private site's noised sums), 0 for exact ones.
	LossNoise, DiffNoise float64
}

// Score is one candidate's validation figures. With noised sums (private
// sites) each standard error includes the noise: √(sd²/n + v/n²), v the
// variance of the noise on the sum.
type Score struct {
	Loss   float64 // mean loss over the validation rows
	SE     float64 // its standard error, sd(l)/√n
	Diff   float64 // mean paired difference from the reference (negative: better)
	DiffSE float64 // its standard error, sd(d)/√n
	Chosen bool
}

// Scores returns the candidates' Scores from their summed Sums, whose
// paired differences are against candidate ref.
func Scores(sums []Sums, ref int) ([]Score, error) {
	if ref < 0 || ref >= len(sums) {
		return nil, fmt.Errorf("%w: reference %d of %d candidates", ErrInput, ref, len(sums))
	}
	n := sums[ref].N
	if n < 2 {
		return nil, fmt.Errorf("%w: %v validation rows, need at least 2", ErrInput, n)
	}
	scores := make([]Score, len(sums))
	for c, s := range sums {
		if s.N != n {
			return nil, fmt.Errorf("%w: candidate %d scored on %v rows, the reference on %v", ErrInput, c, s.N, n)
		}
		scores[c] = Score{Loss: s.Loss / n, Diff: s.Diff / n, SE: noisySE(meanSE(s.Loss, s.LossSq, n), s.LossNoise, n),
			DiffSE: noisySE(meanSE(s.Diff, s.DiffSq, n), s.DiffNoise, n)}
	}
	return scores, nil
}

// meanSE is the standard error of a mean from n, Σv and Σv²: the sample
// standard deviation over √n.
func meanSE(sum, sumSq, n float64) float64 {
	v := (sumSq - sum*sum/n) / (n - 1)
	if v < 0 { // rounding
		v = 0
	}
	return math.Sqrt(v / n)
}

// noisySE returns the standard error se of a mean of n rows with the
// noise of variance v on its sum added: √(se² + v/n²); se itself when v
// is 0, so that exact sums give the figures they always gave.
func noisySE(se, v, n float64) float64 {
	if !(v > 0) {
		return se
	}
	return math.Sqrt(se*se + v/(n*n))
}

// Holdout splits rows with treatments w into training and validation
// rows: in each arm, a share of the rows (rounded, at least one when the arm
// has two or more) drawn with a PCG keyed by seed goes to validation. Both
// lists are in row order.
func Holdout(w []float64, share float64, seed uint64) (train, val []int, err error) {
	if !(share > 0 && share < 1) {
		return nil, nil, fmt.Errorf("%w: validation share %v, want one in (0, 1)", ErrInput, share)
	}
	var arms [2][]int
	for i, v := range w {
		switch v {
		case 0, 1:
			arms[int(v)] = append(arms[int(v)], i)
		default:
			return nil, nil, fmt.Errorf("%w: row %d: treatment %v is not 0 or 1", ErrInput, i, v)
		}
	}
	held := make([]bool, len(w))
	rng := rand.New(rand.NewPCG(seed, 0x686f6c646f7574)) // "holdout"
	for _, rows := range arms {
		k := int(math.Round(share * float64(len(rows))))
		if k == 0 && len(rows) >= 2 {
			k = 1
		}
		if k >= len(rows) {
			k = len(rows) - 1
		}
		for _, j := range rng.Perm(len(rows))[:max(k, 0)] {
			held[rows[j]] = true
		}
	}
	for i, h := range held {
		if h {
			val = append(val, i)
		} else {
			train = append(train, i)
		}
	}
	return train, val, nil
}

// SiteHoldout is Holdout for a site of a federation, which may send sums
// over at least minArm rows of an arm of its training rows and over at
// least 2·minArm held-out rows (the held-out losses sum over both arms,
// like the ATE). A site whose split would break either bound holds no
// rows out (nil): it trains on all its rows and adds nothing to the
// validation losses, which the other sites' held-out rows decide.
func SiteHoldout(w []float64, share float64, seed uint64, minArm int) ([]int, error) {
	train, held, err := Holdout(w, share, seed)
	if err != nil {
		return nil, err
	}
	if len(held) < 2*minArm {
		return nil, nil
	}
	var arms [2]int
	for _, i := range train {
		arms[int(w[i])]++
	}
	if arms[0] < minArm || arms[1] < minArm {
		return nil, nil
	}
	return held, nil
}
