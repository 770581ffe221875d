package store_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/crffd/crffd/store"
)

func TestReadIdentities(t *testing.T) {
	ctx := context.Background()
	path := newRecordsFile(t,
		`ALTER TABLE records ADD COLUMN "national id" TEXT`,
		`UPDATE records SET "national id" = 'AB-' || patient_id WHERE patient_id <= 3`)
	s := openSite(t, path)
	src := recordsSource(path)
	src.IdentityColumns = []string{"national id", "age"}
	recs, err := s.ReadRecords(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	before := tableDigest(t, path, "records")
	got, err := s.ReadIdentities(ctx, recs.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != recs.Len() {
		t.Fatalf("%d rows of identities, want %d", len(got), recs.Len())
	}
	id1 := recs.IDs[0]
	if v := got[id1]; len(v) != 2 || v[0] != "AB-"+id1.String() || v[1] == "" {
		t.Errorf("row %v: identities %q", id1, v)
	}
	if v := got[recs.IDs[len(recs.IDs)-1]]; v[0] != "" {
		t.Errorf("a NULL identity reads as %q, want empty", v[0])
	}
	if tableDigest(t, path, "records") != before {
		t.Error("ReadIdentities changed the user's table")
	}
	none, err := s.ReadIdentities(ctx, store.Layout{Table: "records", ID: "patient_id"})
	if err != nil || !reflect.DeepEqual(none, map[store.RowID][]string{}) {
		t.Errorf("no identity columns: %v, %v", none, err)
	}
}
