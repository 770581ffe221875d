package builtin_test

import (
	"fmt"

	"github.com/crffd/crffd/plugins/kernels"
	"github.com/crffd/crffd/plugins/kernels/builtin"
)

func ExampleMatern() {
	m := builtin.Matern{}
	k, _ := m.Eval([]float64{0, 0}, []float64{0.6, 0.8}, kernels.Params{"nu": 0.5})
	fmt.Printf("Matérn 1/2 at distance 1: %.6f\n", k) // exp(−1)
	omega, _ := m.Sample(2, 3, 1, kernels.Params{"nu": 2.5})
	r, c := omega.Dims()
	fmt.Printf("frequencies: %d×%d\n", r, c)
	// Output:
	// Matérn 1/2 at distance 1: 0.367879
	// frequencies: 2×3
}
