package sqlfiles_test

import (
	"fmt"
	"log"

	"github.com/crffd/crffd/sqlfiles"
)

func ExampleQuoteIdent() {
	q, err := sqlfiles.QuoteIdent(`patient "id"`)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(q)
	// Output: "patient ""id"""
}

func ExampleMigrations() {
	ms, err := sqlfiles.Migrations()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%04d_%s\n", ms[0].Version, ms[0].Name)
	// Output: 0001_init
}

func ExampleCateRecordsView() {
	view, err := sqlfiles.CateRecordsView("visits", "patient_id")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(view)
	// Output:
	// CREATE VIEW crff_cate_records AS
	// SELECT r.*,
	//        c.cate, c.se, c.lower, c.upper,
	//        c.latent_cate, c.latent_sd, c.latent_q025, c.latent_q975,
	//        c.y0, c.y1, c.propensity,
	//        c.run, c.scored_at
	// FROM "visits" AS r
	// LEFT JOIN crff_cate AS c ON c.row_id = +r."patient_id"
}
