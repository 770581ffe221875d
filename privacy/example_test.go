package privacy_test

import (
	"fmt"

	"github.com/crffd/crffd/privacy"
)

// A site spends its budget over two runs of 1500 full-batch rounds: the
// noise of each is calibrated to ε = 1 alone, and the accountant composes
// them.
func Example() {
	sigma, err := privacy.Calibrate(1, 1e-5, 1, 1500)
	if err != nil {
		panic(err)
	}
	var a privacy.Accountant
	for range 2 {
		if err := a.Add(1, sigma, 1500); err != nil {
			panic(err)
		}
	}
	eps, _, err := a.Epsilon(1e-5)
	if err != nil {
		panic(err)
	}
	fmt.Printf("σ = %.1f; two runs spend ε = %.2f\n", sigma, eps)
	// Output: σ = 156.7; two runs spend ε = 1.46
}
