package store_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/crffd/crffd/store"
)

// fit does what `crffd fit` does to a site file, with made-up numbers:
// read, begin a run, save model state, publish results, audit.
func fit(t *testing.T, s *store.Site, src store.Source, run string, v float64) *store.Records {
	t.Helper()
	ctx := context.Background()
	recs, err := s.ReadRecords(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.BeginRun(ctx, run, recs.Layout); err != nil {
		t.Fatal(err)
	}
	m := store.ModelState{Run: run, Model: "outcome", Round: 3, Tensors: []store.Tensor{
		{Name: "beta0", Shape: []int{2, 1}, Values: []float64{v, -v}},
		{Name: "t", Values: []float64{0.5}},
	}}
	if err := s.SaveModel(ctx, m); err != nil {
		t.Fatal(err)
	}
	res := fakeResults(recs.IDs, v)
	res.Rejected = recs.Rejected
	res.Transfer = []store.Transfer{{Peer: "site2", Model: "outcome", Lambda: 0.25}}
	if err := s.WriteResults(ctx, run, res); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendAudit(ctx, store.AuditEntry{Direction: store.Sent, Peer: "coordinator", Kind: "gradient",
		Run: run, Model: "outcome", Round: 3, Tensors: []store.TensorInfo{{Name: "G_beta0", Shape: []int{2, 1}}},
		Bytes: 16, Digest: strings.Repeat("ab", 32)}); err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestWriteResults(t *testing.T) {
	ctx := context.Background()
	path := newRecordsFile(t)
	before := tableDigest(t, path, "records")
	s := openSite(t, path)
	recs := fit(t, s, recordsSource(path), "run-1", 2)

	cates, err := s.ReadCATE(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cates) != 12 || cates[0].RowID != recs.IDs[0] || cates[0].CATE != 2 || cates[0].Run != "run-1" || cates[0].ScoredAt.IsZero() {
		t.Errorf("crff_cate: %d rows, first %+v", len(cates), cates[0])
	}
	ates, err := s.ReadATE(ctx)
	if err != nil || len(ates) != 2 || ates[0].Scope != store.ScopeLocal || ates[0].Estimator != store.EstimatorAIPW ||
		ates[0].ATE != 2 || ates[0].N != 12 || ates[0].SE != 0.1 || ates[0].Lower != 2-0.196 || ates[0].Clipped != 0 ||
		ates[1].Estimator != store.EstimatorPlugIn || !math.IsNaN(ates[1].SE) || !math.IsNaN(ates[1].Upper) || ates[1].Clipped != -1 {
		t.Errorf("crff_ate: %+v, %v", ates, err)
	}
	if err := s.WriteATE(ctx, "run-1", store.ATE{Scope: store.ScopeGlobal, Estimator: store.EstimatorPlugIn, ATE: 1.5, SE: math.NaN(), Lower: math.NaN(), Upper: math.NaN(), N: 40, Clipped: -1,
		Sites: []string{"site1", "site3"}}); err != nil {
		t.Fatal(err)
	}
	ates, _ = s.ReadATE(ctx)
	if len(ates) != 3 || ates[2].Scope != store.ScopeGlobal || !math.IsNaN(ates[2].SE) || ates[2].N != 40 ||
		strings.Join(ates[2].Sites, ",") != "site1,site3" || ates[0].Sites != nil {
		t.Errorf("crff_ate after the global ATE: %+v", ates)
	}
	// A global AIPW row of noised sums keeps the part of its se the noise
	// accounts for.
	if err := s.WriteATE(ctx, "run-1", store.ATE{Scope: store.ScopeGlobal, Estimator: store.EstimatorAIPW, ATE: 1.4, SE: 0.5, Lower: 0.42, Upper: 2.38, N: 40,
		Clipped: 0, Private: true, NoiseSE: 0.3}); err != nil {
		t.Fatal(err)
	}
	ates, _ = s.ReadATE(ctx)
	if len(ates) != 4 || ates[2].Estimator != store.EstimatorAIPW || ates[2].NoiseSE != 0.3 || !ates[2].Private || ates[0].NoiseSE != 0 {
		t.Errorf("crff_ate after the private global ATE: %+v", ates)
	}
	tr, err := s.ReadTransfer(ctx)
	if err != nil || len(tr) != 1 || tr[0].Lambda != 0.25 || tr[0].Run != "run-1" {
		t.Errorf("crff_transfer: %+v, %v", tr, err)
	}
	run, err := s.CurrentRun(ctx)
	if err != nil || run.ID != "run-1" || run.State != store.RunCurrent || run.PublishedAt.IsZero() ||
		strings.Join(run.Layout.Covariates, ",") != strings.Join(recs.Layout.Covariates, ",") {
		t.Errorf("current run %+v, %v", run, err)
	}

	// What users run in the shell.
	db := rawDB(t, path)
	var n int
	var lo, hi float64
	if err := db.QueryRow(`SELECT count(*), min(cate - lower), min(upper - cate) FROM crff_cate`).Scan(&n, &lo, &hi); err != nil || n != 12 || lo < 0 || hi < 0 {
		t.Errorf("crff_cate: %d rows, %v, %v: %v", n, lo, hi, err)
	}
	var scope string
	var ate float64
	if err := db.QueryRow(`SELECT scope, ate FROM crff_ate WHERE scope = 'local' AND estimator = 'aipw'`).Scan(&scope, &ate); err != nil || ate != 2 {
		t.Errorf("local ATE %v, %v", ate, err)
	}
	s.Close()
	if after := tableDigest(t, path, "records"); after != before {
		t.Errorf("a fit changed the user's table:\nbefore %s\nafter  %s", before, after)
	}
}

func TestWriteResultsReplacesRun(t *testing.T) {
	ctx := context.Background()
	path := newRecordsFile(t)
	s := openSite(t, path)
	fit(t, s, recordsSource(path), "run-1", 1)
	// A second run, on a view with another id column name: the view
	// crff_cate_records follows.
	execSQL(t, path, `CREATE VIEW cohort AS SELECT patient_id AS "Patient ""ID""", age, bmi, treated, outcome FROM records WHERE patient_id <= 8`)
	src := store.Source{DB: path, Table: "cohort", IDColumn: `patient "id"`, TreatmentColumn: "treated", OutcomeColumn: "outcome"}
	fit(t, s, src, "run-2", 5)
	cates, _ := s.ReadCATE(ctx)
	if len(cates) != 8 || cates[7].CATE != 5 || cates[7].Run != "run-2" {
		t.Errorf("crff_cate after run-2: %d rows, last %+v", len(cates), cates[len(cates)-1])
	}
	if _, err := s.LoadModel(ctx, "run-1", "outcome"); !errors.Is(err, store.ErrNoModel) {
		t.Errorf("run-1's model state survived run-2: %v", err)
	}
	if _, err := s.LookupRun(ctx, "run-1"); !errors.Is(err, store.ErrNoRun) {
		t.Errorf("run-1 survived run-2: %v", err)
	}
	db := rawDB(t, path)
	var n, scored int
	if err := db.QueryRow(`SELECT count(*), count(cate) FROM crff_cate_records WHERE "Patient ""ID""" > 4`).Scan(&n, &scored); err != nil || n != 4 || scored != 4 {
		t.Errorf("crff_cate_records: %d rows, %d scored, %v", n, scored, err)
	}
	// The join uses the primary key of crff_cate's rows rather than
	// scanning them per row.
	if p := store.QueryPlan(t, db, `SELECT * FROM crff_cate_records`); !strings.Contains(p, "SEARCH crff_cate_rows USING PRIMARY KEY (run=? AND row_id=?)") {
		t.Errorf("crff_cate_records plan does not search crff_cate by key: %s", p)
	}
	// So do the views over the user's rows and crff_cate: with crff_cate
	// a view, SQLite would otherwise take its rows, in key order, as the
	// outer loop, and scan the user's table once per row.
	for _, view := range []string{"crff_overlap", "crff_positivity"} {
		if p := store.QueryPlan(t, db, `SELECT * FROM `+view); !strings.Contains(p, "SEARCH crff_cate_rows USING PRIMARY KEY (run=? AND row_id=?)") || strings.Contains(p, "SCAN crff_cate_rows") {
			t.Errorf("%s does not search crff_cate by key: %s", view, p)
		}
	}
	if _, err := s.AppendScores(ctx, "run-1", fakeResults([]store.RowID{store.IntID(1)}, 1).CATE, nil); !errors.Is(err, store.ErrStaleRun) {
		t.Errorf("AppendScores for a replaced run: err = %v, want ErrStaleRun", err)
	}
}

func TestWriteResultsRefuses(t *testing.T) {
	ctx := context.Background()
	path := newRecordsFile(t)
	s := openSite(t, path)
	recs := fit(t, s, recordsSource(path), "run-1", 1)
	good := fakeResults(recs.IDs, 9)
	tests := []struct {
		name   string
		run    string
		change func(*store.Results)
		want   error
	}{
		{"unknown run", "run-9", func(*store.Results) {}, store.ErrNoRun},
		{"NaN cate", "run-1", func(r *store.Results) { r.CATE[3].CATE = math.NaN() }, store.ErrBadResult},
		{"lower > upper", "run-1", func(r *store.Results) { r.CATE[0].Lower = 99 }, store.ErrBadResult},
		{"CATE se without interval", "run-1", func(r *store.Results) { r.CATE[0].Upper = math.NaN() }, store.ErrBadResult},
		{"negative CATE se", "run-1", func(r *store.Results) { r.CATE[0].SE = -1 }, store.ErrBadResult},
		{"latent quantiles reversed", "run-1", func(r *store.Results) { r.CATE[0].LatentQ025 = 99 }, store.ErrBadResult},
		{"NaN latent CATE", "run-1", func(r *store.Results) { r.CATE[0].Latent = math.NaN() }, store.ErrBadResult},
		{"propensity 2", "run-1", func(r *store.Results) { r.CATE[0].Propensity = 2 }, store.ErrBadResult},
		{"local ATE with sites", "run-1", func(r *store.Results) { r.ATE[0].Sites = []string{"site1"} }, store.ErrBadResult},
		{"infinite AIPW score", "run-1", func(r *store.Results) { r.CATE[0].PSI = math.Inf(1) }, store.ErrBadResult},
		{"infinite uncalibrated CATE", "run-1", func(r *store.Results) { r.CATE[0].Raw = math.Inf(-1) }, store.ErrBadResult},
		{"duplicate id", "run-1", func(r *store.Results) { r.CATE[1].RowID = r.CATE[0].RowID }, store.ErrBadResult},
		{"NULL id", "run-1", func(r *store.Results) { r.CATE[1].RowID = store.RowID{} }, store.ErrBadResult},
		{"scope", "run-1", func(r *store.Results) { r.ATE[0].Scope = "site" }, store.ErrBadResult},
		{"estimator", "run-1", func(r *store.Results) { r.ATE[0].Estimator = "ols" }, store.ErrBadResult},
		{"two local aipw", "run-1", func(r *store.Results) { r.ATE[1] = r.ATE[0] }, store.ErrBadResult},
		{"interval without se", "run-1", func(r *store.Results) { r.ATE[1].Lower, r.ATE[1].Upper = 1, 2 }, store.ErrBadResult},
		{"se without interval", "run-1", func(r *store.Results) { r.ATE[0].Upper = math.NaN() }, store.ErrBadResult},
		{"ATE lower > upper", "run-1", func(r *store.Results) { r.ATE[0].Lower = r.ATE[0].Upper + 1 }, store.ErrBadResult},
		{"clipped > n", "run-1", func(r *store.Results) { r.ATE[0].Clipped = r.ATE[0].N + 1 }, store.ErrBadResult},
		{"noise se beyond the se", "run-1", func(r *store.Results) { r.ATE[0].NoiseSE = r.ATE[0].SE * 2 }, store.ErrBadResult},
		{"negative noise se", "run-1", func(r *store.Results) { r.ATE[0].NoiseSE = -0.01 }, store.ErrBadResult},
		{"lambda", "run-1", func(r *store.Results) { r.Transfer = []store.Transfer{{Peer: "a", Model: "m", Lambda: 1.5}} }, store.ErrBadResult},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := good
			res.CATE = append([]store.CATE(nil), good.CATE...)
			res.ATE = append([]store.ATE(nil), good.ATE...)
			tt.change(&res)
			if err := s.WriteResults(ctx, tt.run, res); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			cates, _ := s.ReadCATE(ctx)
			if len(cates) != 12 || cates[0].CATE != 1 {
				t.Errorf("a refused write changed crff_cate")
			}
		})
	}
}

// fittedRecords returns a records file with run-1 fitted on it (age and
// smoker as covariates, faulty rows skipped), its open site and records.
func fittedRecords(t *testing.T) (string, *store.Site, *store.Records) {
	t.Helper()
	path := newRecordsFile(t)
	s := openSite(t, path)
	src := recordsSource(path)
	src.OnInvalid = store.Skip
	src.Covariates = []string{"age", "smoker"}
	return path, s, fit(t, s, src, "run-1", 1)
}

func TestUnscoredRows(t *testing.T) {
	ctx := context.Background()
	path, s, _ := fittedRecords(t)

	recs, err := s.UnscoredRows(ctx)
	if err != nil || recs.Len() != 0 || recs.Data != nil {
		t.Fatalf("UnscoredRows right after a fit: %+v, %v", recs, err)
	}
	// New patients: no treatment or outcome yet; one has no age; one has
	// a smoker value the run's binary covariate cannot take.
	execSQL(t, path, `INSERT INTO records (patient_id, age, smoker) VALUES (13, 70, 1), (14, NULL, 0), ('p15', 40, 0), (16, 50, 3)`)
	before := tableDigest(t, path, "records")
	recs, err = s.UnscoredRows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if recs.Len() != 2 || recs.IDs[0] != store.IntID(13) || recs.IDs[1] != store.TextID("p15") {
		t.Fatalf("unscored ids %v", recs.IDs)
	}
	if x := recs.Data.X.RawRowView(0); x[0] != 70 || x[1] != 1 || !math.IsNaN(recs.Data.W[0]) || !math.IsNaN(recs.Data.Y[0]) {
		t.Errorf("row 13: x %v, w %v, y %v", x, recs.Data.W[0], recs.Data.Y[0])
	}
	if len(recs.Rejected) != 2 || recs.Rejected[0].RowID != store.IntID(14) || !errors.Is(recs.Rejected[1].Err, store.ErrNotBinary) {
		t.Errorf("rejected %+v", recs.Rejected)
	}
	scores := fakeResults(recs.IDs, 3).CATE
	if n, err := s.AppendScores(ctx, "run-1", scores, recs.Rejected); err != nil || n != 2 {
		t.Fatalf("append 2 scores and 2 rejections: %d rejected anew, %v", n, err)
	}
	// Appending again is harmless.
	if _, err := s.AppendScores(ctx, "run-1", scores, nil); err != nil {
		t.Fatal(err)
	}
	// Rejected rows are read again, every time, since their faults may
	// be mended; the same faults change nothing.
	again, err := s.UnscoredRows(ctx)
	if err != nil || again.Len() != 0 {
		t.Fatalf("after AppendScores: %+v, %v", again, err)
	}
	if n, err := s.AppendScores(ctx, "run-1", nil, again.Rejected); err != nil || n != 0 {
		t.Errorf("the same rejections again: %d rejected anew, %v", n, err)
	}
	if after := tableDigest(t, path, "records"); after != before {
		t.Error("scoring changed the user's table")
	}
	// Row 14 gets its age: it is scored, and its rejection goes. Row 16's
	// fault changes: its line is replaced.
	execSQL(t, path, `UPDATE records SET age = 60 WHERE patient_id = 14`)
	execSQL(t, path, `UPDATE records SET smoker = NULL WHERE patient_id = 16`)
	before = tableDigest(t, path, "records")
	mended, err := s.UnscoredRows(ctx)
	if err != nil || mended.Len() != 1 || mended.IDs[0] != store.IntID(14) {
		t.Fatalf("after mending row 14: %+v, %v", mended, err)
	}
	if n, err := s.AppendScores(ctx, "run-1", fakeResults(mended.IDs, 3).CATE, mended.Rejected); err != nil || n != 1 {
		t.Errorf("row 16 rejected for another fault: %d rejected anew, %v", n, err)
	}
	var lines14, null16 int
	db := rawDB(t, path)
	if err := db.QueryRow(`SELECT count(*) FILTER (WHERE row_id = 14), count(*) FILTER (WHERE row_id = 16 AND reason LIKE '%null%')
		FROM crff_rejected`).Scan(&lines14, &null16); err != nil || lines14 != 0 || null16 != 1 {
		t.Errorf("crff_rejected: %d lines for the mended row 14, %d null lines for row 16, %v", lines14, null16, err)
	}
	cates, _ := s.ReadCATE(ctx)
	if len(cates) != 15 {
		t.Errorf("crff_cate holds %d rows, want 15", len(cates))
	}
	s.Close()
	if after := tableDigest(t, path, "records"); after != before {
		t.Error("scoring changed the user's table")
	}
}

func TestUnscoredRowsRefuse(t *testing.T) {
	ctx := context.Background()
	path := newRecordsFile(t)
	s := openSite(t, path)
	if _, err := s.UnscoredRows(ctx); !errors.Is(err, store.ErrNoRun) {
		t.Errorf("UnscoredRows with no run: err = %v, want ErrNoRun", err)
	}
	fit(t, s, recordsSource(path), "run-1", 1)
	execSQL(t, path, `INSERT INTO records (patient_id, age, smoker, bmi, recovered) VALUES (13, NULL, 1, 20, 0)`)
	if _, err := s.UnscoredRows(ctx); !errors.Is(err, store.ErrNull) || !strings.HasSuffix(err.Error(), `column "age": NULL value in 1 row (id 13)`) {
		t.Errorf("err = %v, want ErrNull naming id 13", err)
	}
}

func TestModelState(t *testing.T) {
	ctx := context.Background()
	path := newRecordsFile(t)
	s := openSite(t, path)
	recs, err := s.ReadRecords(ctx, recordsSource(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SaveModel(ctx, store.ModelState{Run: "r", Model: "latent"}); !errors.Is(err, store.ErrNoRun) {
		t.Errorf("SaveModel before BeginRun: err = %v, want ErrNoRun", err)
	}
	if err := s.BeginRun(ctx, "r", recs.Layout); err != nil {
		t.Fatal(err)
	}
	if err := s.BeginRun(ctx, "r", recs.Layout); err == nil {
		t.Error("BeginRun twice succeeded")
	}
	odd := []float64{math.NaN(), math.Inf(-1), math.Copysign(0, -1), math.SmallestNonzeroFloat64, 1, 2}
	want := store.ModelState{Run: "r", Model: "latent", Round: 7, Tensors: []store.Tensor{
		{Name: "W_q0", Shape: []int{2, 3}, Values: odd},
		{Name: "a", Shape: []int{}, Values: []float64{-0.25}},
		{Name: "empty", Shape: []int{0, 4}, Values: []float64{}},
	}}
	if err := s.SaveModel(ctx, want); err != nil {
		t.Fatal(err)
	}
	want.Round = 8
	if err := s.SaveModel(ctx, want); err != nil { // replaces
		t.Fatal(err)
	}
	got, err := s.LoadModel(ctx, "r", "latent")
	if err != nil {
		t.Fatal(err)
	}
	if got.Round != 8 || len(got.Tensors) != 3 || got.SavedAt.IsZero() {
		t.Fatalf("loaded %+v", got)
	}
	for i, v := range got.Tensors[0].Values {
		if math.Float64bits(v) != math.Float64bits(odd[i]) {
			t.Errorf("value %d: %v, want %v bit for bit", i, v, odd[i])
		}
	}
	if g := got.Tensors[0].Shape; len(g) != 2 || g[0] != 2 || g[1] != 3 {
		t.Errorf("shape %v", g)
	}
	if _, err := s.LoadModel(ctx, "r", "outcome"); !errors.Is(err, store.ErrNoModel) {
		t.Errorf("LoadModel of an unsaved model: err = %v, want ErrNoModel", err)
	}
	bad := store.ModelState{Run: "r", Model: "m", Tensors: []store.Tensor{{Name: "x", Shape: []int{2, 2}, Values: []float64{1}}}}
	if err := s.SaveModel(ctx, bad); !errors.Is(err, store.ErrBadResult) {
		t.Errorf("SaveModel with a wrong shape: err = %v, want ErrBadResult", err)
	}
	// The blob is little-endian float64, readable without crffd.
	var hex string
	if err := rawDB(t, path).QueryRow(`SELECT hex(value) FROM crff_model_tensor WHERE name = 'a'`).Scan(&hex); err != nil || hex != "000000000000D0BF" {
		t.Errorf("blob of -0.25 = %s, %v; want 000000000000D0BF", hex, err)
	}
}

func TestAudit(t *testing.T) {
	ctx := context.Background()
	path := newRecordsFile(t)
	s := openSite(t, path)
	e := store.AuditEntry{Direction: store.Received, Peer: "coordinator", Kind: "weights", Run: "r", Model: "latent",
		Round: 4, Tensors: []store.TensorInfo{{Name: "W_q0", Shape: []int{40, 2}}, {Name: "r"}}, Bytes: 648, Digest: "00ff"}
	if err := s.AppendAudit(ctx, e); err != nil {
		t.Fatal(err)
	}
	e.Direction, e.Kind = store.Sent, "gradient"
	if err := s.AppendAudit(ctx, e); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendAudit(ctx, store.AuditEntry{Direction: "leaked"}); err == nil {
		t.Error("AppendAudit accepted a bad direction")
	}
	got, err := s.ReadAudit(ctx, 0, 0)
	if err != nil || len(got) != 2 || got[0].Kind != "weights" || got[1].Direction != store.Sent ||
		len(got[0].Tensors) != 2 || got[0].Tensors[0].Shape[1] != 2 || got[0].Tensors[1].Shape == nil {
		t.Fatalf("ReadAudit: %+v, %v", got, err)
	}
	if later, _ := s.ReadAudit(ctx, got[0].ID, 1); len(later) != 1 || later[0].ID != got[1].ID {
		t.Errorf("ReadAudit after %d: %+v", got[0].ID, later)
	}
	db := rawDB(t, path)
	var names string
	if err := db.QueryRow(`SELECT group_concat(j.value ->> 'name') FROM crff_audit, json_each(tensors) AS j WHERE direction = 'sent'`).Scan(&names); err != nil || names != "W_q0,r" {
		t.Errorf("tensor names by SQL: %q, %v", names, err)
	}
	if _, err := db.Exec(`UPDATE crff_audit SET bytes = 0`); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Errorf("UPDATE of crff_audit: err = %v, want append-only", err)
	}
}

func TestSaveSetup(t *testing.T) {
	ctx := context.Background()
	path := newRecordsFile(t)
	site := openSite(t, path)
	recs, err := site.ReadRecords(ctx, recordsSource(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := site.BeginRun(ctx, "r1", recs.Layout); err != nil {
		t.Fatal(err)
	}
	r, err := site.LookupRun(ctx, "r1")
	if err != nil || r.Setup != nil {
		t.Fatalf("before SaveSetup: setup %q, err %v; want none", r.Setup, err)
	}
	if err := site.SaveSetup(ctx, "r1", []byte(`{"kernel":"gaussian"}`)); err != nil {
		t.Fatal(err)
	}
	if r, err = site.LookupRun(ctx, "r1"); err != nil || string(r.Setup) != `{"kernel":"gaussian"}` {
		t.Errorf("after SaveSetup: setup %q, err %v", r.Setup, err)
	}
	if err := site.SaveSetup(ctx, "r1", []byte(`{broken`)); !errors.Is(err, store.ErrBadResult) {
		t.Errorf("invalid JSON: err = %v, want store.ErrBadResult", err)
	}
	if err := site.SaveSetup(ctx, "nosuch", []byte(`{}`)); !errors.Is(err, store.ErrNoRun) {
		t.Errorf("unknown run: err = %v, want ErrNoRun", err)
	}
}

// TestPruneScores: the CATEs and faults of rows deleted from the user's
// table leave crff_cate and crff_rejected; the others stay.
func TestPruneScores(t *testing.T) {
	ctx := context.Background()
	path, s, recs := fittedRecords(t)
	before, _ := s.ReadCATE(ctx)
	// With nothing to delete it only reads: it succeeds while another
	// connection holds the write lock.
	lock, err := rawDB(t, path).BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(ctx, `UPDATE records SET age = age WHERE patient_id = 1`); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PruneScores(ctx, "run-1"); err != nil || n != 0 {
		t.Fatalf("prune with nothing deleted, under another writer's lock: %d, %v", n, err)
	}
	lock.Rollback()
	gone := recs.IDs[0]
	execSQL(t, path, `DELETE FROM records WHERE patient_id = ?`, gone)
	if n, err := s.PruneScores(ctx, "run-1"); err != nil || n != 1 {
		t.Fatalf("prune after deleting row %v: %d, %v", gone, n, err)
	}
	after, _ := s.ReadCATE(ctx)
	if len(after) != len(before)-1 {
		t.Errorf("crff_cate has %d rows, want %d", len(after), len(before)-1)
	}
	for _, c := range after {
		if c.RowID == gone {
			t.Errorf("row %v's CATE is still in crff_cate", gone)
		}
	}
	if _, err := s.PruneScores(ctx, "run-0"); !errors.Is(err, store.ErrStaleRun) {
		t.Errorf("pruned the scores of a run that does not exist: %v, want ErrStaleRun", err)
	}
	// A daemon still on run-1 when crffd fit publishes run-2 meets
	// ErrStaleRun, which it treats as transient, and loads run-2.
	src := recordsSource(path)
	src.OnInvalid = store.Skip
	src.Covariates = []string{"age", "smoker"}
	fit(t, s, src, "run-2", 2)
	if _, err := s.PruneScores(ctx, "run-1"); !errors.Is(err, store.ErrStaleRun) {
		t.Errorf("pruned the scores of a replaced run: %v, want ErrStaleRun", err)
	}
	if _, err := s.ForgetEdited(ctx, "run-1"); !errors.Is(err, store.ErrStaleRun) {
		t.Errorf("forgot the scores of a replaced run: %v, want ErrStaleRun", err)
	}
}
