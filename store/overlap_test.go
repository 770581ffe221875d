package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/store"
)

// TestOverlap publishes made-up propensities and checks the crff_overlap
// view, its Go reader and the positivity warning in the log.
func TestOverlap(t *testing.T) {
	ctx := context.Background()
	path := newRecordsFile(t)
	var logs bytes.Buffer
	s, err := store.Open(ctx, path, store.Options{BusyTimeout: 2 * time.Second,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs, err := s.ReadRecords(ctx, recordsSource(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.BeginRun(ctx, "run-1", recs.Layout); err != nil {
		t.Fatal(err)
	}
	// Patients 1, 3, …, 11 are treated, the others are controls.
	prop := map[int64]float64{1: 0.005, 2: 0.5, 3: 0.995, 4: 0.02, 5: 0.5, 6: 0.5,
		7: 0.5, 8: 0.5, 9: 0.5, 10: 0.5, 11: 1, 12: 0}
	res := fakeResults(recs.IDs, 1)
	for i := range res.CATE {
		id, _ := res.CATE[i].RowID.Int()
		res.CATE[i].Propensity = prop[id]
	}
	if err := s.WriteResults(ctx, "run-1", res); err != nil {
		t.Fatal(err)
	}

	got, err := s.ReadOverlap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 || got[0].Lower != 0 || got[9].Upper != 1 {
		t.Fatalf("crff_overlap: %+v", got)
	}
	want := map[int][2]int{1: {1, 1}, 2: {0, 1}, 6: {3, 4}, 10: {2, 0}}
	treated, control := 0, 0
	for _, b := range got {
		w := want[b.Bucket]
		if b.Treated != w[0] || b.Control != w[1] {
			t.Errorf("bucket %d [%v, %v): treated %d control %d, want %v", b.Bucket, b.Lower, b.Upper, b.Treated, b.Control, w)
		}
		if ext := b.Bucket == 1 || b.Bucket == 10; b.Extreme != ext {
			t.Errorf("bucket %d: extreme %v", b.Bucket, b.Extreme)
		}
		treated += b.Treated
		control += b.Control
	}
	if treated != 6 || control != 6 {
		t.Errorf("crff_overlap counts %d treated and %d controls, want 6 and 6", treated, control)
	}

	tr, co, err := s.ReadPropensities(ctx)
	if err != nil || len(tr) != 6 || len(co) != 6 || tr[0] != 0.005 || co[len(co)-1] != 0 {
		t.Errorf("propensities: treated %v, control %v, %v", tr, co, err)
	}

	// What an operator runs in the shell.
	var n int
	if err := rawDB(t, path).QueryRow(`SELECT sum(treated + control) FROM crff_overlap WHERE extreme`).Scan(&n); err != nil || n != 4 {
		t.Errorf("rows in extreme buckets: %d, %v; want 4", n, err)
	}

	var warn map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["level"] == "WARN" {
			warn = m
		}
	}
	if warn == nil {
		t.Fatalf("no positivity warning in the log:\n%s", logs.String())
	}
	// 12 rows: both arms are thin, and 4 propensities are extreme.
	wantMsg := "positivity: 6 treated rows (treated = 1) among 12 (50.0%), below the 20 rows and 5% of the rows each arm should hold; " +
		"6 control rows (treated = 0) among 12 (50.0%), below the 20 rows and 5% of the rows each arm should hold; " +
		"4 of 12 rows (33.3%) have a propensity outside [0.01, 0.99], above the 5% limit; see crff_positivity and crff_overlap"
	if warn["msg"] != wantMsg || warn["outside"] != 4.0 || warn["treated"] != 6.0 || warn["control"] != 6.0 || warn["run"] != "run-1" {
		t.Errorf("positivity warning %v\nwant msg %s", warn, wantMsg)
	}
	c, err := s.ReadPositivity(ctx)
	if err != nil || c.Treated != 6 || c.Control != 6 || c.Outside != 4 {
		t.Errorf("ReadPositivity = %+v, %v", c, err)
	}
	var viewWarning string
	if err := rawDB(t, path).QueryRow(`SELECT warning FROM crff_positivity`).Scan(&viewWarning); err != nil || viewWarning != c.Warning() {
		t.Errorf("crff_positivity warns %q (%v), want %q", viewWarning, err, c.Warning())
	}

	// Propensities within the bounds publish without a warning about them
	// (the arms stay thin).
	logs.Reset()
	if err := s.WriteResults(ctx, "run-1", fakeResults(recs.IDs, 2)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "propensity outside") || !strings.Contains(logs.String(), "6 control rows") {
		t.Errorf("warning for propensities of 0.5:\n%s", logs.String())
	}
	got, _ = s.ReadOverlap(ctx)
	if len(got) != 10 || got[5].Treated != 6 || got[5].Control != 6 || got[5].Share != 1 || got[0].Share != 0 {
		t.Errorf("crff_overlap after the second publication: %+v", got)
	}
}

// TestLoss appends and reads back per-round losses.
func TestLoss(t *testing.T) {
	ctx := context.Background()
	path := newRecordsFile(t)
	s := openSite(t, path)
	recs, err := s.ReadRecords(ctx, recordsSource(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AppendLoss(ctx, "nope", store.Loss{Model: "outcome", Round: 1, Loss: 1}); err == nil {
		t.Error("loss of an unknown run accepted")
	}
	if err := s.BeginRun(ctx, "run-1", recs.Layout); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendLoss(ctx, "run-1", store.Loss{Model: "outcome", Round: -1, Loss: 1}); err == nil {
		t.Error("negative round accepted")
	}
	for r := range 3 {
		if err := s.AppendLoss(ctx, "run-1",
			store.Loss{Model: "outcome", Round: r, Loss: 10 - float64(r)},
			store.Loss{Model: "propensity", Round: r, Loss: 5 - float64(r)}); err != nil {
			t.Fatal(err)
		}
	}
	// A resumed run records a round again.
	if err := s.AppendLoss(ctx, "run-1", store.Loss{Model: "outcome", Round: 2, Loss: 7.5}); err != nil {
		t.Fatal(err)
	}
	ls, err := s.ReadLoss(ctx, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 6 || ls[0].Model != "outcome" || ls[2].Loss != 7.5 || ls[3].Model != "propensity" || ls[5].Round != 2 || ls[0].Run != "run-1" {
		t.Errorf("crff_loss: %+v", ls)
	}
	if all, err := s.ReadLoss(ctx, ""); err != nil || len(all) != 6 {
		t.Errorf("all losses: %d, %v", len(all), err)
	}
}
