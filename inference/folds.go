package inference

import (
	"fmt"
	"math/rand/v2"

	"github.com/crffd/crffd/internal/mapped"
)

// foldStream keys the permutation of Folds, so that it differs from every
// other draw made with the same seed.
const foldStream = 0x63726666666f6c64 // "crfffold"

// Folds assigns each of the rows with treatments w to one of k folds for
// cross-fitting: the rows of each arm are shuffled by seed and dealt to the
// folds in turn, so every fold gets ⌊n_a/k⌋ or ⌈n_a/k⌉ rows of each arm a.
// The assignment depends only on w, k and seed.
func Folds(w []float64, k int, seed uint64) ([]int, error) {
	if k < 2 {
		return nil, fmt.Errorf("%w: %d folds; cross-fitting needs at least 2", ErrInput, k)
	}
	treated := 0
	for i, v := range w {
		if v != 0 && v != 1 {
			return nil, fmt.Errorf("%w: row %d: treatment is not 0 or 1", ErrInput, i)
		}
		treated += int(v)
	}
	// Each arm's positions, and the folds, of millions of rows are kept out
	// of a one-shot fit's heap (mapped.Use).
	arms := [2][]int{mapped.LargeArray[int](len(w) - treated)[:0], mapped.LargeArray[int](treated)[:0]}
	for i, v := range w {
		arms[int(v)] = append(arms[int(v)], i)
	}
	rng := rand.New(rand.NewPCG(seed, foldStream))
	fold := mapped.LargeArray[int](len(w))
	next := 0
	for _, rows := range arms {
		rng.Shuffle(len(rows), func(a, b int) { rows[a], rows[b] = rows[b], rows[a] })
		for _, i := range rows {
			fold[i] = next
			next = (next + 1) % k
		}
	}
	return fold, nil
}
