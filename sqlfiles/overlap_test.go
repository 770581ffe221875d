package sqlfiles

import (
	"context"
	"strings"
	"testing"
)

func TestOverlapView(t *testing.T) {
	ctx := context.Background()
	db, _ := migrated(t, 0)
	if _, err := db.ExecContext(ctx, `CREATE TABLE "my ""records""" ("patient id" INTEGER, "got it" INTEGER)`); err != nil {
		t.Fatal(err)
	}
	view, err := OverlapView(`my "records"`, "patient id", "got it")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(view, "CREATE VIEW crff_overlap") {
		t.Errorf("view SQL starts %.40q", view)
	}
	if _, err := db.ExecContext(ctx, view); err != nil {
		t.Fatalf("create view: %v\n%s", err, view)
	}
	var stored string
	if err := db.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE name = 'crff_overlap'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != view {
		t.Errorf("sqlite_schema keeps\n%s\nwant\n%s", stored, view)
	}
	var n, extreme int
	if err := db.QueryRowContext(ctx, `SELECT count(*), sum(extreme) FROM crff_overlap`).Scan(&n, &extreme); err != nil || n != 10 || extreme != 2 {
		t.Errorf("empty crff_overlap: %d buckets, %d extreme, %v", n, extreme, err)
	}
	if _, err := OverlapView("t", "id", ""); err == nil {
		t.Error("empty treatment column name accepted")
	}
}
