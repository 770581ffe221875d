package dataset_test

import (
	"fmt"
	"log"
	"strings"

	"github.com/crffd/crffd/dataset"
)

func ExampleRead() {
	const csv = "1,5.6,4.3,3.3,6.9,-0.53,1,0\n" +
		"0,6.9,7.9,6.6,7.6,-1.74,0,1\n" +
		"0,3.0,6.6,1.6,6.1,-0.81,2,0\n" +
		"1,6.1,5.2,4.9,7.0,0.38,1,1\n"
	t, err := dataset.Read(strings.NewReader(csv), "example.csv")
	if err != nil {
		log.Fatal(err)
	}
	schema, err := dataset.InferSchema(t)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.Rows(), "rows,", t.Covariates(), "covariates")
	fmt.Println("binary covariates:", schema.Binary)
	fmt.Printf("true CATE: %.1f\n", t.Tau())
	// Output:
	// 4 rows, 3 covariates
	// binary covariates: [false false true]
	// true CATE: [3.6 1.0 4.5 2.1]
}

func ExampleRead_error() {
	const csv = "1,5.6,4.3,3.3,6.9,-0.53\n" +
		"0,6.9,abc,6.6,7.6,-1.74\n"
	_, err := dataset.Read(strings.NewReader(csv), "ihdp_npci_1.csv")
	fmt.Println(err)
	// Output:
	// ihdp_npci_1.csv: row 2, column 3 (y_cfactual): parse "abc": invalid syntax
}

// The IHDP benchmark as the paper uses it: three sources of 249 rows, each
// split into 50 training, 100 test and 99 validation rows. Real code reads
// the file with dataset.ReadFile("ihdp_npci_1.csv").
func ExampleTable_Sources() {
	csv := strings.Repeat("0,1,2,1,2,0.5,1\n", 747) // 747 rows of the IHDP shape
	t, err := dataset.Read(strings.NewReader(csv), "ihdp.csv")
	if err != nil {
		log.Fatal(err)
	}
	src, err := t.Sources(249)
	if err != nil {
		log.Fatal(err)
	}
	train, test, val, err := src[0].Split(50, 100, 99)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d sources; source 1: %d train, %d test, %d validation rows\n",
		len(src), train.Rows(), test.Rows(), val.Rows())

	_, err = t.Sources(250)
	fmt.Println(err)
	// Output:
	// 3 sources; source 1: 50 train, 100 test, 99 validation rows
	// dataset: 747 rows do not divide into sources of 250 (2 sources leave 247 rows over)
}
