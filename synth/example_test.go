package synth_test

import (
	"fmt"
	"io"
	"log"

	"github.com/crffd/crffd/dataset"
	"github.com/crffd/crffd/synth"
)

// The paper's dissimilar-sources setting: five sources of 1000 rows, source 1
// with Δ = 0 and the others with Δ = 4, written as one IHDP-layout file.
func ExampleGenerate() {
	src, err := synth.Generate(synth.Design{
		Sources: 5,
		Rows:    1000,
		Delta:   []float64{0, 4, 4, 4, 4},
		Seed:    1,
	})
	if err != nil {
		log.Fatal(err)
	}
	all, err := dataset.Concat(src...)
	if err != nil {
		log.Fatal(err)
	}
	if err := dataset.Write(io.Discard, all); err != nil { // a file in practice
		log.Fatal(err)
	}
	fmt.Printf("%d sources, %d rows, %d covariates\n", len(src), all.Rows(), all.Covariates())
	// Output:
	// 5 sources, 5000 rows, 30 covariates
}

// The binary-outcome variant: the true ATE is the mean risk difference.
func ExampleGenerate_binaryOutcome() {
	src, err := synth.Generate(synth.Design{Sources: 3, Rows: 1000, Seed: 2, BinaryOutcome: true})
	if err != nil {
		log.Fatal(err)
	}
	schema, err := dataset.InferSchema(src...)
	if err != nil {
		log.Fatal(err)
	}
	var ate float64
	var n int
	for _, t := range src {
		for _, tau := range t.Tau() {
			ate += tau
			n++
		}
	}
	ate /= float64(n)
	fmt.Println("binary outcome:", schema.BinaryOutcome)
	fmt.Println("true ATE is a risk difference:", ate > -1 && ate < 1)
	// Output:
	// binary outcome: true
	// true ATE is a risk difference: true
}

// The paper's large setting: 100 sources of 1000 rows, Δ from U[0, 8].
func ExampleUniformDeltas() {
	delta, err := synth.UniformDeltas(100, 0, 8, 1)
	if err != nil {
		log.Fatal(err)
	}
	src, err := synth.Generate(synth.Design{Sources: 100, Rows: 1000, Delta: delta, Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(src), "sources of", src[0].Rows(), "rows")
	// Output:
	// 100 sources of 1000 rows
}

// A simple known-truth design: linear confounding by age and score and a
// constant effect of 2. The true ATE of the drawn rows, the mean of Tau, is
// exactly the population ATE here.
func ExampleGenerate_linearConstant() {
	d := synth.Design{Name: synth.DesignLinearConstant, Sources: 1, Rows: 1000, Seed: 1}
	src, err := synth.Generate(d)
	if err != nil {
		log.Fatal(err)
	}
	var ate float64
	for _, tau := range src[0].Tau() {
		ate += tau
	}
	ate /= float64(src[0].Rows())
	population, err := synth.PopulationATE(d.Name, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("covariates:", d.Covariates())
	fmt.Println("true ATE of the rows:", ate, "population:", population)
	// Output:
	// covariates: [age sex score]
	// true ATE of the rows: 2 population: 2
}

// The true population ATE of every simple design at Δ = 0 (the rough
// design's depends on the seed).
func ExamplePopulationATE() {
	for _, name := range synth.DesignNames()[1:] {
		if name == synth.DesignRough {
			continue
		}
		ate, err := synth.PopulationATE(name, 0)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%-15s %.4f\n", name, ate)
	}
	// Output:
	// linear-constant 2.0000
	// linear-varying  2.0000
	// lognormal       2.0251
	// binary          0.2060
}
