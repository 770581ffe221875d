package inference_test

import (
	"fmt"

	"github.com/crffd/crffd/inference"
)

// Two sites score their rows and share only Sums; the federation's estimate
// is that of the pooled rows.
func Example() {
	siteA, _, _ := inference.Scores(
		[]float64{1, 0, 1, 0}, []float64{3.1, 1.2, 2.9, 0.8},
		inference.Nuisance{
			Propensity: []float64{0.6, 0.4, 0.5, 0.3},
			Mu0:        []float64{1, 1, 1, 1},
			Mu1:        []float64{3, 3, 3, 3},
		}, inference.DefaultClip)
	siteB, _, _ := inference.Scores(
		[]float64{1, 0}, []float64{2.5, 1.1},
		inference.Nuisance{Propensity: []float64{0.5, 0.5}, Mu0: []float64{1, 1}, Mu1: []float64{3, 3}},
		inference.DefaultClip)
	global, _ := inference.Accumulate(siteA).Add(inference.Accumulate(siteB)).Estimate()
	fmt.Printf("ATE %.3f (se %.3f), 95%% interval %.3f to %.3f over %d rows\n",
		global.Estimate, global.SE, global.Lower, global.Upper, global.N)
	// Output:
	// ATE 1.787 (se 0.185), 95% interval 1.424 to 2.149 over 6 rows
}
