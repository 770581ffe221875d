package selection_test

import (
	"fmt"
	"log"

	"github.com/crffd/crffd/selection"
)

// Two sites score three candidates; the reference is candidate 0. The
// sites' pair sums add up; the ensemble is the candidates within one
// standard error of the best, here candidate 1 alone, since its paired
// difference from the others is well below zero.
func ExampleDecide() {
	psi := [][]float64{{2.1, -0.3, 4.0, 1.2}, {0.5, 2.8, 3.1}}
	cates := [][][]float64{
		{{1, 1, 1, 1}, {2, 0, 3.5, 1}, {0, 0, 0, 0}},
		{{1, 1, 1}, {0.6, 2.5, 3}, {0, 0, 0}},
	}
	var total selection.Pairs
	for s := range psi {
		p, err := selection.PairSums(psi[s], cates[s])
		if err != nil {
			log.Fatal(err)
		}
		if err := total.Add(p); err != nil {
			log.Fatal(err)
		}
	}
	scores, ens, err := selection.Decide(total, nil, selection.DefaultZ)
	if err != nil {
		log.Fatal(err)
	}
	for c, sc := range scores {
		fmt.Printf("candidate %d: loss %.3f, difference %+.3f ± %.3f\n", c, sc.Loss, sc.Diff, sc.DiffSE)
	}
	fmt.Println("members:", ens.Members)
	// Output:
	// candidate 0: loss 2.834, difference +0.000 ± 0.000
	// candidate 1: loss 0.071, difference -2.763 ± 1.160
	// candidate 2: loss 5.663, difference +2.829 ± 1.154
	// members: [1]
}
