package store_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/crffd/crffd/store"
)

// A site's life: import records, read them through the configuration,
// publish a run's results, and read them back as a user would.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "crffd-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "hospital-a.sqlite")

	const visits = "patient_id,age,smoker,treated,recovery_days\n" +
		"1,34,0,1,3.5\n2,51,1,0,6\n3,47,0,1,4\n4,29,1,0,5.5\n"
	if _, err := store.ImportCSV(ctx, path, "visits", strings.NewReader(visits), store.ImportOptions{Header: true}); err != nil {
		log.Fatal(err)
	}

	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	recs, err := s.ReadRecords(ctx, store.Source{
		DB: path, Table: "visits",
		IDColumn: "patient_id", TreatmentColumn: "treated", OutcomeColumn: "recovery_days",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("covariates:", recs.Layout.Covariates, "binary:", recs.Schema.Binary)
	fmt.Println("rows:", recs.Data.Rows())

	// Train (not shown), then publish.
	if err := s.BeginRun(ctx, "run-1", recs.Layout); err != nil {
		log.Fatal(err)
	}
	res := store.Results{ATE: []store.ATE{{Scope: store.ScopeLocal, Estimator: store.EstimatorAIPW, ATE: -1.9, SE: 0.4, Lower: -2.684, Upper: -1.116, N: recs.Len()}}}
	for _, id := range recs.IDs {
		res.CATE = append(res.CATE, store.CATE{RowID: id, CATE: -1.9, SE: 0.4, Lower: -2.68, Upper: -1.12,
			Latent: -1.5, LatentSD: 0.5, LatentQ025: -2.5, LatentQ975: -0.5, Y0: 5.5, Y1: 3.6, Propensity: 0.5})
	}
	if err := s.WriteResults(ctx, "run-1", res); err != nil {
		log.Fatal(err)
	}
	ates, err := s.ReadATE(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s %s ATE %.1f [%.2f, %.2f] over %d rows\n", ates[0].Scope, ates[0].Estimator, ates[0].ATE, ates[0].Lower, ates[0].Upper, ates[0].N)
	// Output:
	// covariates: [age smoker] binary: [false true]
	// rows: 4
	// local aipw ATE -1.9 [-2.68, -1.12] over 4 rows
}

// Validation errors name the file, the table, the column and the first
// offending row ids, and wrap a sentinel to test with errors.Is.
func ExampleValidationError() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "crffd-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "site.sqlite")
	const csv = "id,age,w,y\n1,34,1,2\n2,,0,1\n3,47,1,2\n4,,0,3\n"
	if _, err := store.ImportCSV(ctx, path, "records", strings.NewReader(csv), store.ImportOptions{Header: true}); err != nil {
		log.Fatal(err)
	}
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	_, err = s.ReadRecords(ctx, store.Source{DB: path, Table: "records", IDColumn: "id", TreatmentColumn: "w", OutcomeColumn: "y"})
	var ve *store.ValidationError
	if errors.As(err, &ve) {
		fmt.Println(errors.Is(err, store.ErrNull), ve.Column, ve.RowIDs)
		fmt.Println(strings.TrimPrefix(err.Error(), `site "`+path+`", `))
	}
	// Output:
	// true age [2 4]
	// table "records", column "age": NULL value in 2 rows (ids 2, 4)
}

func ExampleImportCSV() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "crffd-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "site.sqlite")
	const csv = "1,34.5,0,02139,first visit\n2,51,1,10001,\n"
	res, err := store.ImportCSV(ctx, path, "visits", strings.NewReader(csv), store.ImportOptions{Name: "visits.csv"})
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range res.Columns {
		fmt.Println(c.Name, c.Type)
	}
	_, err = store.ImportCSV(ctx, path, "visits", strings.NewReader(csv), store.ImportOptions{Name: "visits.csv"})
	fmt.Println(errors.Is(err, store.ErrTableExists))
	// Output:
	// c1 INTEGER
	// c2 REAL
	// c3 INTEGER
	// c4 TEXT
	// c5 TEXT
	// true
}
