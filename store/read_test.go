package store_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/crffd/crffd/store"
)

// chosenHint ends the message of a covariate chosen automatically that
// holds values that are not numbers.
const chosenHint = "it was chosen as a covariate because it is declared numeric or holds numbers (site.covariates is not set); " +
	"correct them, set site.on_invalid: skip to leave their rows out, or list site.covariates without this column"

// textScore adds the column score as crffd import makes it of numbers with
// one "n/a": TEXT, holding the numbers as texts.
var textScore = []string{`ALTER TABLE records ADD COLUMN score TEXT`,
	`UPDATE records SET score = CASE patient_id WHEN 7 THEN 'n/a' ELSE CAST(patient_id * 1.5 AS TEXT) END`}

// TestReadRecordsRefuses covers every validation case: each read fails with
// the right sentinel and a message naming the file, the column and the
// offending ids, and leaves the user's table byte for byte as it was.
func TestReadRecordsRefuses(t *testing.T) {
	tests := []struct {
		name   string
		setup  []string
		args   []any // for the last setup statement
		source func(*store.Source)
		want   error
		msg    string // expected after the file's name
	}{
		{
			name:   "missing table",
			source: func(s *store.Source) { s.Table = "patients" },
			want:   store.ErrMissingTable,
			msg:    `table "patients": no such table or view`,
		},
		{
			name:   "missing column",
			source: func(s *store.Source) { s.OutcomeColumn = "los" },
			want:   store.ErrMissingColumn,
			msg:    `table "records", column "los": no such column`,
		},
		{
			name:   "missing covariate",
			source: func(s *store.Source) { s.Covariates = []string{"age", "height"} },
			want:   store.ErrMissingColumn,
			msg:    `column "height": no such column`,
		},
		{
			name:   "missing identity column",
			source: func(s *store.Source) { s.IdentityColumns = []string{"name"} },
			want:   store.ErrMissingColumn,
			msg:    `column "name": no such column`,
		},
		{
			name:  "NULL covariate",
			setup: []string{`UPDATE records SET age = NULL WHERE patient_id IN (3, 7)`},
			want:  store.ErrNull,
			msg:   `column "age": NULL value in 2 rows (ids 3, 7)`,
		},
		{
			name:  "NaN covariate",
			setup: []string{`UPDATE records SET bmi = ? WHERE patient_id = 5`},
			args:  []any{math.NaN()},
			want:  store.ErrNull,
			msg:   `column "bmi": NULL value in 1 row (id 5)`,
		},
		{
			name:  "text covariate",
			setup: []string{`UPDATE records SET bmi = 'n/a' WHERE patient_id = 4`},
			want:  store.ErrNotNumeric,
			msg:   `column "bmi": not a number in 1 row (id 4); ` + chosenHint,
		},
		{
			name:   "text covariate listed",
			setup:  []string{`UPDATE records SET bmi = 'n/a' WHERE patient_id = 4`},
			source: func(s *store.Source) { s.Covariates = []string{"age", "bmi"} },
			want:   store.ErrNotNumeric,
			msg:    `column "bmi": not a number in 1 row (id 4)`,
		},
		{
			name:  "blob covariate",
			setup: []string{`UPDATE records SET bmi = x'00ff' WHERE patient_id = 4`},
			want:  store.ErrNotNumeric,
			msg:   `column "bmi": not a number in 1 row (id 4); ` + chosenHint,
		},
		{
			// Issue 13: crffd import stores a column of numbers with one
			// "n/a" as TEXT. Chosen automatically, it is a covariate, and
			// only the "n/a" row is at fault, not every row.
			name:  "numbers in a TEXT column with one n/a",
			setup: textScore,
			want:  store.ErrNotNumeric,
			msg:   `column "score": not a number in 1 row (id 7); ` + chosenHint,
		},
		{
			name:   "numbers in a TEXT column with one n/a, listed",
			setup:  textScore,
			source: func(s *store.Source) { s.Covariates = []string{"age", "score"} },
			want:   store.ErrNotNumeric,
			msg:    `column "score": not a number in 1 row (id 7)`,
		},
		{
			name: "numbers in a TEXT column, a NaN and an infinity",
			setup: []string{`ALTER TABLE records ADD COLUMN score TEXT`,
				`UPDATE records SET score = CASE patient_id WHEN 2 THEN 'NaN' WHEN 3 THEN '-inf' ELSE ' ' || patient_id || '.5 ' END`},
			want: store.ErrNotFinite,
			msg:  `column "score": not a finite number in 2 rows (ids 2, 3)`,
		},
		{
			name: "a code with a leading zero in a TEXT column",
			setup: []string{`ALTER TABLE records ADD COLUMN zip TEXT`,
				`UPDATE records SET zip = CASE patient_id WHEN 5 THEN '02139' ELSE '10001' END`},
			want: store.ErrNotNumeric,
			msg:  `column "zip": not a number in 1 row (id 5); ` + chosenHint,
		},
		{
			name: "TEXT treatment with one n/a",
			setup: []string{`CREATE TABLE t2 (patient_id INTEGER, treated TEXT, outcome REAL, age REAL)`,
				`INSERT INTO t2 SELECT patient_id, CASE patient_id WHEN 8 THEN 'n/a' ELSE CAST(treated AS TEXT) END, outcome, age FROM records`},
			source: func(s *store.Source) { s.Table = "t2" },
			want:   store.ErrTreatment,
			msg:    `column "treated": treatment is not 0 or 1 in 1 row (id 8)`,
		},
		{
			name:  "+Inf covariate stored as 9e999",
			setup: []string{`UPDATE records SET age = 9e999 WHERE patient_id = 2`},
			want:  store.ErrNotFinite,
			msg:   `column "age": not a finite number in 1 row (id 2)`,
		},
		{
			name:  "-Inf covariate",
			setup: []string{`UPDATE records SET age = -9e999 WHERE patient_id IN (2, 4)`},
			want:  store.ErrNotFinite,
			msg:   `column "age": not a finite number in 2 rows (ids 2, 4)`,
		},
		{
			name:  "Inf bound from Go",
			setup: []string{`UPDATE records SET age = ? WHERE patient_id = 6`},
			args:  []any{math.Inf(1)},
			want:  store.ErrNotFinite,
			msg:   `column "age": not a finite number in 1 row (id 6)`,
		},
		{
			name:  "many offending rows",
			setup: []string{`UPDATE records SET bmi = NULL WHERE patient_id > 3`},
			want:  store.ErrNull,
			msg:   `column "bmi": NULL value in 9 rows (first ids 4, 5, 6, 7, 8)`,
		},
		{
			name:   "binary covariate not 0/1",
			setup:  []string{`UPDATE records SET smoker = 2 WHERE patient_id = 8`},
			source: func(s *store.Source) { s.Binary = []string{"smoker"} },
			want:   store.ErrNotBinary,
			msg:    `column "smoker": binary covariate is not 0 or 1 in 1 row (id 8)`,
		},
		{
			name:  "treatment 2",
			setup: []string{`UPDATE records SET treated = 2 WHERE patient_id = 9`},
			want:  store.ErrTreatment,
			msg:   `column "treated": treatment is not 0 or 1 in 1 row (id 9)`,
		},
		{
			name:  "treatment NULL and text",
			setup: []string{`UPDATE records SET treated = CASE patient_id WHEN 1 THEN NULL ELSE 'yes' END WHERE patient_id IN (1, 10)`},
			want:  store.ErrTreatment,
			msg:   `column "treated": treatment is not 0 or 1 in 2 rows (ids 1, 10)`,
		},
		{
			name:  "treatment 0.5",
			setup: []string{`UPDATE records SET treated = 0.5 WHERE patient_id = 11`},
			want:  store.ErrTreatment,
			msg:   `column "treated": treatment is not 0 or 1 in 1 row (id 11)`,
		},
		{
			name:  "NULL outcome",
			setup: []string{`UPDATE records SET outcome = NULL WHERE patient_id = 12`},
			want:  store.ErrNullOutcome,
			msg:   `column "outcome": outcome is NULL in 1 row (id 12)`,
		},
		{
			name:  "infinite outcome",
			setup: []string{`UPDATE records SET outcome = 9e999 WHERE patient_id = 12`},
			want:  store.ErrNotFinite,
			msg:   `column "outcome": not a finite number in 1 row (id 12)`,
		},
		{
			name:  "binary outcome not 0/1",
			setup: []string{`UPDATE records SET recovered = 3 WHERE patient_id IN (2, 5)`},
			source: func(s *store.Source) {
				s.OutcomeColumn, s.OutcomeType, s.Covariates = "recovered", store.OutcomeBinary, []string{"age", "bmi"}
			},
			want: store.ErrBinaryOutcome,
			msg:  `column "recovered": binary outcome is not 0 or 1 in 2 rows (ids 2, 5)`,
		},
		{
			name:  "duplicate ids",
			setup: []string{`UPDATE records SET patient_id = 4 WHERE patient_id IN (6, 8)`},
			want:  store.ErrDuplicateID,
			msg:   `column "patient_id": duplicate id in 3 rows (ids 4, 4, 4)`,
		},
		{
			name:  "NULL id",
			setup: []string{`UPDATE records SET patient_id = NULL WHERE patient_id = 3`},
			want:  store.ErrBadID,
			msg:   `column "patient_id": id is not an integer or a text in 1 row (id NULL)`,
		},
		{
			name:  "empty table",
			setup: []string{`DELETE FROM records`},
			want:  store.ErrEmpty,
			msg:   `table "records": no rows`,
		},
		{
			name:  "no treated rows",
			setup: []string{`UPDATE records SET treated = 0`},
			want:  store.ErrNoTreated,
			msg:   `column "treated": no treated rows (treatment = 1)`,
		},
		{
			name:  "no control rows",
			setup: []string{`UPDATE records SET treated = 1`},
			want:  store.ErrNoControl,
			msg:   `column "treated": no control rows (treatment = 0)`,
		},
		{
			name:  "no covariates",
			setup: []string{`CREATE TABLE bare (id INTEGER, w INTEGER, y REAL, name TEXT)`, `INSERT INTO bare VALUES (1, 0, 1.0, 'a'), (2, 1, 2.0, 'b')`},
			source: func(s *store.Source) {
				s.Table, s.IDColumn, s.TreatmentColumn, s.OutcomeColumn = "bare", "id", "w", "y"
			},
			want: store.ErrNoCovariates,
			msg:  `table "bare": no covariate columns`,
		},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := newRecordsFile(t, tt.setup[:max(0, len(tt.setup)-1)]...)
			if len(tt.setup) > 0 {
				execSQL(t, path, tt.setup[len(tt.setup)-1], tt.args...)
			}
			src := recordsSource(path)
			if tt.source != nil {
				tt.source(&src)
			}
			table := src.Table
			if tt.want == store.ErrMissingTable {
				table = "records"
			}
			before := tableDigest(t, path, table)
			s := openSite(t, path)
			recs, err := s.ReadRecords(ctx, src)
			if !errors.Is(err, tt.want) {
				t.Fatalf("ReadRecords: err = %v, want %v", err, tt.want)
			}
			if recs != nil {
				t.Errorf("ReadRecords returned records with an error")
			}
			want := `site "` + path + `", ` + tt.msg
			if !strings.HasPrefix(err.Error(), `site "`+path+`"`) || !strings.HasSuffix(err.Error(), tt.msg) {
				t.Errorf("message\n got %s\nwant %s", err, want)
			}
			var ve *store.ValidationError
			if !errors.As(err, &ve) || ve.File != path {
				t.Errorf("err is not a *ValidationError naming the file: %#v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if after := tableDigest(t, path, table); after != before {
				t.Errorf("user table changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// TestReadRecordsDuplicatesApart: ids that SQLite orders as equal without
// being the same value (the integer 1 and the real 1.0; 'A' and 'a' under
// a NOCASE collation), stored so that they interleave, still have their
// duplicates found: the rows come with equal ids next to each other.
func TestReadRecordsDuplicatesApart(t *testing.T) {
	for _, c := range []struct {
		name, create, rows, ids string
	}{
		{"integer and real", `CREATE TABLE mixed (id, w INTEGER, y REAL, age REAL)`,
			`(1, 0, 1.0, 30), (1.0, 1, 2.0, 40), (1, 1, 3.0, 50), (2, 0, 1.5, 35)`, "(ids 1, 1)"},
		{"nocase text", `CREATE TABLE mixed (id TEXT COLLATE NOCASE, w INTEGER, y REAL, age REAL)`,
			`('A', 0, 1.0, 30), ('a', 1, 2.0, 40), ('A', 1, 3.0, 50), ('b', 0, 1.5, 35)`, `(ids "A", "A")`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := newRecordsFile(t, c.create, `INSERT INTO mixed VALUES `+c.rows)
			src := store.Source{DB: path, Table: "mixed", IDColumn: "id", TreatmentColumn: "w", OutcomeColumn: "y", Covariates: []string{"age"}}
			_, err := openSite(t, path).ReadRecords(context.Background(), src)
			if !errors.Is(err, store.ErrDuplicateID) || !strings.Contains(err.Error(), "duplicate id in 2 rows "+c.ids) {
				t.Errorf("err = %v, want the duplicates %s", err, c.ids)
			}
		})
	}
}

// TestReadRecordsMapped: with Options.MapRows a read's covariates,
// treatments, outcomes and digests go to mappings (here from the first
// value), rejected rows and all, and come out as the heap's read: the same
// rows, ids, values and digests.
func TestReadRecordsMapped(t *testing.T) {
	path := newRecordsFile(t,
		`UPDATE records SET age = NULL WHERE patient_id = 2`,
		`UPDATE records SET patient_id = 9 WHERE patient_id = 10`)
	src := recordsSource(path)
	src.OnInvalid = store.Skip
	ctx := context.Background()
	heap, err := openSite(t, path).ReadRecords(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	s, err := store.Open(ctx, path, store.Options{MapRows: true, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	store.SetMapRowsMin(s, 1)
	got, err := s.ReadRecords(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	if store.Mapped(heap) || !store.Mapped(got) {
		t.Skipf("mapped: heap read %v, mapped read %v (no unnamed files here?)", store.Mapped(heap), store.Mapped(got))
	}
	// The log says where and how much, and no value: the 12 rows read,
	// of 4 covariates, a treatment and an outcome, and a 32-byte digest.
	if !strings.Contains(log.String(), "rows kept in unnamed temporary files") || !strings.Contains(log.String(), "bytes=960") {
		t.Errorf("log:\n%s", log.String())
	}
	if !slices.Equal(got.IDs, heap.IDs) || !slices.Equal(got.Data.W, heap.Data.W) || !slices.Equal(got.Data.Y, heap.Data.Y) ||
		!slices.Equal(got.Data.X.RawMatrix().Data, heap.Data.X.RawMatrix().Data) || !slices.Equal(got.XDigests, heap.XDigests) || got.Len() != 9 {
		t.Errorf("the mapped read differs from the heap's: %d rows, ids %v", got.Len(), got.IDs)
	}
}

// TestReadRecordsJoinsFaults checks that several faults are all reported.
func TestReadRecordsJoinsFaults(t *testing.T) {
	path := newRecordsFile(t,
		`UPDATE records SET age = NULL WHERE patient_id = 2`,
		`UPDATE records SET treated = 7 WHERE patient_id = 5`)
	s := openSite(t, path)
	_, err := s.ReadRecords(context.Background(), recordsSource(path))
	if !errors.Is(err, store.ErrNull) || !errors.Is(err, store.ErrTreatment) {
		t.Fatalf("err = %v, want both ErrNull and ErrTreatment", err)
	}
	if lines := strings.Split(err.Error(), "\n"); len(lines) != 2 {
		t.Errorf("want one line per fault, got %q", err)
	}
}

// TestReadRecordsSkip checks on_invalid: skip: bad rows are left out and
// listed, the others are read, and the user's table is unchanged.
func TestReadRecordsSkip(t *testing.T) {
	path := newRecordsFile(t,
		`UPDATE records SET age = NULL WHERE patient_id = 2`,
		`UPDATE records SET bmi = 9e999, treated = 5 WHERE patient_id = 5`,
		`UPDATE records SET patient_id = 9 WHERE patient_id = 10`)
	before := tableDigest(t, path, "records")
	s := openSite(t, path)
	src := recordsSource(path)
	src.OnInvalid = store.Skip
	recs, err := s.ReadRecords(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if recs.Read != 12 || recs.Len() != 8 || recs.Data.Rows() != 8 {
		t.Errorf("read %d, kept %d (%d data rows), want 12 and 8", recs.Read, recs.Len(), recs.Data.Rows())
	}
	var got []string
	for _, r := range recs.Rejected {
		got = append(got, r.RowID.String()+" "+r.Column+": "+r.Reason)
	}
	want := []string{
		"2 age: NULL value",
		"5 treated: treatment is not 0 or 1",
		"5 bmi: not a finite number",
		"9 patient_id: duplicate id",
		"9 patient_id: duplicate id",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rejected\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, id := range recs.IDs {
		if n, _ := id.Int(); n == 2 || n == 5 || n == 9 {
			t.Errorf("rejected row %s was kept", id)
		}
	}
	if err := s.BeginRun(context.Background(), "r1", recs.Layout); err != nil {
		t.Fatal(err)
	}
	res := fakeResults(recs.IDs, 1)
	res.Rejected = recs.Rejected
	if err := s.WriteResults(context.Background(), "r1", res); err != nil {
		t.Fatal(err)
	}
	stored, err := s.ReadRejected(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != len(want) || stored[0].Run != "r1" || stored[0].Reason != "NULL value" {
		t.Errorf("crff_rejected = %+v", stored)
	}
	s.Close()
	if after := tableDigest(t, path, "records"); after != before {
		t.Errorf("user table changed:\nbefore %s\nafter  %s", before, after)
	}
}

// TestReadRecordsSkipStillRefuses checks that skipping cannot hide a site
// with nothing left to train on.
func TestReadRecordsSkipStillRefuses(t *testing.T) {
	tests := []struct {
		name  string
		setup string
		want  error
		msg   string
	}{
		{"all rejected", `UPDATE records SET age = NULL`, store.ErrEmpty, `no rows: all 12 rows were rejected`},
		{"no control left", `UPDATE records SET outcome = NULL WHERE treated = 0`, store.ErrNoControl, `no control rows (treatment = 0)`},
		{"no treated left", `UPDATE records SET treated = 3 WHERE treated = 1`, store.ErrNoTreated, `no treated rows (treatment = 1)`},
		{"empty table", `DELETE FROM records`, store.ErrEmpty, `table "records": no rows`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := newRecordsFile(t, tt.setup)
			before := tableDigest(t, path, "records")
			s := openSite(t, path)
			src := recordsSource(path)
			src.OnInvalid = store.Skip
			_, err := s.ReadRecords(context.Background(), src)
			if !errors.Is(err, tt.want) || !strings.HasSuffix(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want %v ending %q", err, tt.want, tt.msg)
			}
			s.Close()
			if after := tableDigest(t, path, "records"); after != before {
				t.Errorf("user table changed")
			}
		})
	}
}

// TestReadRecordsLayout checks covariate selection and type detection.
func TestReadRecordsLayout(t *testing.T) {
	path := newRecordsFile(t,
		`CREATE VIEW cohort AS SELECT patient_id AS pid, age / 10.0 AS decade, smoker + 0 AS smokes,
		        note, treated AS w, recovered AS y FROM records WHERE patient_id <= 10`)
	s := openSite(t, path)
	ctx := context.Background()
	tests := []struct {
		name       string
		src        store.Source
		covariates string
		binary     []bool
		binaryY    bool
		rows       int
	}{
		{
			name:       "all numeric columns",
			src:        recordsSource(path),
			covariates: "age smoker bmi recovered",
			binary:     []bool{false, true, false, true},
			rows:       12,
		},
		{
			name: "listed, case-insensitive, typed",
			src: func() store.Source {
				s := recordsSource(path)
				s.Covariates, s.Continuous, s.IdentityColumns = []string{"BMI", "Smoker"}, []string{"smoker"}, []string{"note"}
				return s
			}(),
			covariates: "bmi smoker",
			binary:     []bool{false, false},
			rows:       12,
		},
		{
			name: "view with untyped columns, binary outcome detected",
			src: store.Source{Table: "cohort", DB: path, IDColumn: "pid", TreatmentColumn: "w",
				OutcomeColumn: "y"},
			covariates: "decade smokes",
			binary:     []bool{false, true},
			binaryY:    true,
			rows:       10,
		},
		{
			name: "identity columns are not covariates",
			src: func() store.Source {
				s := recordsSource(path)
				s.IdentityColumns = []string{"age", "visit"}
				return s
			}(),
			covariates: "smoker bmi recovered",
			binary:     []bool{true, false, true},
			rows:       12,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, err := s.ReadRecords(ctx, tt.src)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(recs.Layout.Covariates, " "); got != tt.covariates {
				t.Errorf("covariates %q, want %q", got, tt.covariates)
			}
			if !slices.Equal(recs.Schema.Binary, tt.binary) || recs.Schema.BinaryOutcome != tt.binaryY {
				t.Errorf("schema %+v, want binary %v, outcome %v", recs.Schema, tt.binary, tt.binaryY)
			}
			n, d := recs.Data.X.Dims()
			if n != tt.rows || d != len(tt.binary) || len(recs.IDs) != n || len(recs.Data.W) != n {
				t.Errorf("data %d×%d with %d ids, want %d rows", n, d, len(recs.IDs), tt.rows)
			}
		})
	}
}

func TestReadRecordsValues(t *testing.T) {
	path := newRecordsFile(t, `UPDATE records SET patient_id = 'p' || patient_id WHERE patient_id > 10`)
	s := openSite(t, path)
	src := recordsSource(path)
	src.Covariates = []string{"age", "smoker"}
	recs, err := s.ReadRecords(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	// Integers sort before texts, as in SQLite.
	if got := recs.IDs[0].String() + " " + recs.IDs[11].String(); got != `1 "p12"` {
		t.Errorf("first and last ids %s", got)
	}
	if x := recs.Data.X.RawRowView(1); x[0] != 51.5 || x[1] != 1 {
		t.Errorf("row of id 2 = %v", x)
	}
	if recs.Data.W[1] != 0 || recs.Data.Y[1] != 1.5 {
		t.Errorf("w, y of id 2 = %v, %v", recs.Data.W[1], recs.Data.Y[1])
	}
}

// TestReadRecordsUnused checks the rule that chooses the covariates when
// none are listed: a column holding a number is one, whatever its declared
// type, and every other column is listed in Unused with why, so that none
// is left out silently.
func TestReadRecordsUnused(t *testing.T) {
	path := newRecordsFile(t,
		`ALTER TABLE records ADD COLUMN score TEXT`,
		`UPDATE records SET score = ' ' || (patient_id * 0.5) || ' '`,
		`ALTER TABLE records ADD COLUMN blank`,
		`ALTER TABLE records ADD COLUMN code TEXT`,
		`UPDATE records SET code = '0' || patient_id`,
		`ALTER TABLE records ADD COLUMN remark TEXT`,
		`UPDATE records SET remark = 'ok' WHERE patient_id = 3`)
	s := openSite(t, path)
	recs, err := s.ReadRecords(context.Background(), recordsSource(path))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(recs.Layout.Covariates, " "), "age smoker bmi recovered score"; got != want {
		t.Errorf("covariates %q, want %q", got, want)
	}
	if x := recs.Data.X.RawRowView(1); x[4] != 1 { // patient 2: ' 1.0 '
		t.Errorf("score of patient 2 read as %v, want 1", x[4])
	}
	var got []string
	for _, u := range recs.Unused {
		got = append(got, u.Name+": "+u.Reason)
	}
	want := []string{
		"note: none of its 4 values is a number",
		"visit: none of its 12 values is a number",
		"blank: it holds no value (every one is NULL)",
		"code: none of its 12 values is a number", // codes with a leading zero, as crffd import reads them
		"remark: its only value is not a number",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("unused\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Listed covariates leave nothing to report.
	src := recordsSource(path)
	src.Covariates = []string{"age", "score"}
	recs, err = s.ReadRecords(context.Background(), src)
	if err != nil || len(recs.Unused) != 0 {
		t.Errorf("listed covariates: unused %v, %v", recs.Unused, err)
	}
}

// TestReadRecordsSkipTextColumn checks on_invalid: skip on a TEXT column
// of numbers with one "n/a": that row alone is left out, with a reason and
// the column, and the others are read as numbers.
func TestReadRecordsSkipTextColumn(t *testing.T) {
	path := newRecordsFile(t, textScore...)
	s := openSite(t, path)
	src := recordsSource(path)
	src.OnInvalid = store.Skip
	recs, err := s.ReadRecords(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs.Rejected) != 1 || recs.Rejected[0].Column != "score" || recs.Rejected[0].Reason != "not a number" {
		t.Fatalf("rejected %+v, want row 7 for column score", recs.Rejected)
	}
	if id, _ := recs.Rejected[0].RowID.Int(); id != 7 || recs.Len() != 11 {
		t.Errorf("rejected row %s, kept %d rows", recs.Rejected[0].RowID, recs.Len())
	}
	if x := recs.Data.X.RawRowView(0); x[len(x)-1] != 1.5 {
		t.Errorf("score of patient 1 read as %v, want 1.5", x[len(x)-1])
	}
}

// TestCheckArms checks the refusal of an arm with too few rows: each arm
// below the minimum is named with its count, and rows left out by
// on_invalid: skip are said to be.
func TestCheckArms(t *testing.T) {
	tests := []struct {
		name  string
		setup []string
		skip  bool
		least int
		want  []string // the messages after the file's name, joined
	}{
		{"enough", nil, false, 5, nil},
		{"one control row", []string{`UPDATE records SET treated = patient_id <> 2`}, false, 5,
			[]string{`table "records", column "treated": 1 control row (treated = 0) among 12; at least 5 are needed in each arm`}},
		{"four treated rows", []string{`UPDATE records SET treated = 0 WHERE patient_id > 7`}, false, 5,
			[]string{`column "treated": 4 treated rows (treated = 1) among 12; at least 5 are needed in each arm`}},
		{"both arms", nil, false, 7, []string{
			`column "treated": 6 treated rows (treated = 1) among 12; at least 7 are needed in each arm`,
			`column "treated": 6 control rows (treated = 0) among 12; at least 7 are needed in each arm`}},
		{"after skipping", []string{`UPDATE records SET age = NULL WHERE patient_id IN (2, 4)`}, true, 5, []string{
			`column "treated": 4 control rows (treated = 0) among 10 kept (2 left out by on_invalid: skip); at least 5 are needed in each arm`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := newRecordsFile(t, tt.setup...)
			s := openSite(t, path)
			src := recordsSource(path)
			if tt.skip {
				src.OnInvalid = store.Skip
			}
			recs, err := s.ReadRecords(context.Background(), src)
			if err != nil {
				t.Fatal(err)
			}
			err = recs.CheckArms(tt.least)
			if tt.want == nil {
				if err != nil {
					t.Errorf("CheckArms(%d) = %v", tt.least, err)
				}
				return
			}
			if !errors.Is(err, store.ErrFewArmRows) {
				t.Fatalf("CheckArms(%d) = %v, want ErrFewArmRows", tt.least, err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("%d errors, want %d:\n%v", len(lines), len(tt.want), err)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(lines[i], `site "`+path+`", `) || !strings.HasSuffix(lines[i], w) {
					t.Errorf("error %d\n got %s\nwant %s", i, lines[i], w)
				}
			}
			var ae *store.ArmError
			if !errors.As(err, &ae) || ae.Least != tt.least || ae.File != path {
				t.Errorf("not an *ArmError naming the file: %#v", err)
			}
		})
	}
}

// TestSampleRecords: a sample keeps every stride-th row in id order, the
// stride chosen from the table's rows, as ReadRecords reads them; it counts
// every row, sees no fault in a row it does not keep, and refuses one in a
// row it keeps as ReadRecords does.
func TestSampleRecords(t *testing.T) {
	ctx := context.Background()
	path := newRecordsFile(t)
	s := openSite(t, path)
	all, err := s.ReadRecords(ctx, recordsSource(path))
	if err != nil {
		t.Fatal(err)
	}
	sample, err := s.SampleRecords(ctx, recordsSource(path), 4)
	if err != nil {
		t.Fatal(err)
	}
	if sample.Rows != 12 || sample.Stride != 3 || sample.Len() != 4 || sample.Validate <= 0 {
		t.Fatalf("sample of %d rows, stride %d, %d kept, validated in %v; want 12, 3, 4", sample.Rows, sample.Stride, sample.Len(), sample.Validate)
	}
	for k, i := range []int{0, 3, 6, 9} {
		if sample.IDs[k] != all.IDs[i] || !slices.Equal(sample.Data.X.RawRowView(k), all.Data.X.RawRowView(i)) ||
			sample.Data.W[k] != all.Data.W[i] || sample.Data.Y[k] != all.Data.Y[i] || sample.XDigests[k] != all.XDigests[i] {
			t.Errorf("sample row %d is not row %d", k, i)
		}
	}
	if whole, err := s.SampleRecords(ctx, recordsSource(path), 100); err != nil || whole.Stride != 1 || whole.Len() != 12 {
		t.Errorf("a sample larger than the table: %v", err)
	}

	execSQL(t, path, `UPDATE records SET outcome = NULL WHERE patient_id = 2`)
	if _, err := s.SampleRecords(ctx, recordsSource(path), 4); err != nil {
		t.Errorf("a fault in a row left out of the sample: %v", err)
	}
	execSQL(t, path, `UPDATE records SET outcome = NULL WHERE patient_id = 4`)
	_, err = s.SampleRecords(ctx, recordsSource(path), 4)
	if !errors.Is(err, store.ErrNullOutcome) || !strings.Contains(err.Error(), "(id 4)") {
		t.Errorf("a fault in a sampled row: %v", err)
	}
	src := recordsSource(path)
	src.Table = ""
	if _, err := s.SampleRecords(ctx, src, 4); err == nil || !strings.Contains(err.Error(), "sample records from") {
		t.Errorf("a source without a table: %v", err)
	}
}
