package main

import (
	"bytes"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/positivity"
	"github.com/crffd/crffd/store"
)

// issueCSV writes the CSV of issue 13: 300 rows of id, w, y, age, sex,
// score and name, where row 17's score is "n/a" when na is set, and the
// rows listed in control are the only controls (every 2nd row when nil).
func issueCSV(t *testing.T, dir string, na bool, control map[int]bool) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("id,w,y,age,sex,score,name\n")
	for i := 1; i <= 300; i++ {
		w := i % 2
		if control != nil {
			w = 1
			if control[i] {
				w = 0
			}
		}
		score := fmt.Sprintf("%.3f", float64(i%17)/7-1)
		if na && i == 17 {
			score = "n/a"
		}
		fmt.Fprintf(&b, "%d,%d,%.2f,%.1f,%d,%s,patient %d\n", i, w, float64(i%11)/3+float64(w), 30+float64(i%40), i%3%2, score, i)
	}
	path := filepath.Join(dir, "t.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// importIssueSite imports the CSV into dir/t.sqlite as crffd import does
// and returns the import's standard output and a site configuration for
// it, extended with extra lines under site:.
func importIssueSite(t *testing.T, csvPath, extra string) (stdout, cfg string) {
	t.Helper()
	dir := filepath.Dir(csvPath)
	a, err := execute(t, "import", "--db", filepath.Join(dir, "t.sqlite"), "--table", "records", "--csv", csvPath, "--header")
	if err != nil {
		t.Fatal(err)
	}
	cfg = filepath.Join(dir, "site.yaml")
	body := "site:\n  name: x\n  db: t.sqlite\n  table: records\n  id_column: id\n  treatment_column: w\n  outcome_column: y\n" + extra
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return a.stdout.(*bytes.Buffer).String(), cfg
}

// TestImportSaysWhyText checks that crffd import names every column it
// stored as TEXT and why, with a warning for the column of numbers.
func TestImportSaysWhyText(t *testing.T) {
	out, _ := importIssueSite(t, issueCSV(t, t.TempDir(), true, nil), "")
	for _, want := range []string{
		"(id INTEGER, w INTEGER, y REAL, age REAL, sex INTEGER, score TEXT, name TEXT)\n",
		"warning: column score stored as TEXT: 1 of 300 values is not a number (line 18: \"n/a\"); as a covariate, crffd fit refuses these rows",
		"\ncolumn name stored as TEXT: none of its 300 values is a number (line 2: \"patient 1\"); crffd fit does not choose it as a covariate\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("import printed\n%s\nwant it to contain %q", out, want)
		}
	}
	if strings.Count(out, "warning:") != 1 {
		t.Errorf("import warns %d times, want once:\n%s", strings.Count(out, "warning:"), out)
	}
}

// chosen is what fit prints of the covariates it chose in the issue's table.
const chosen = "covariates: age (continuous), sex (binary), score (continuous)\nnot a covariate: name (none of its 300 values is a number)\n"

// TestFitRefusesBeforeTraining runs crffd fit in process on the cases it
// must refuse before training (so before it needs a kernel plugin), and
// checks the message and that no run was begun.
func TestFitRefusesBeforeTraining(t *testing.T) {
	tests := []struct {
		name    string
		na      bool
		control map[int]bool
		extra   string
		want    []string // in the error
		notWant string
		stdout  string // printed before refusing
	}{
		{name: "a confounder with one n/a, covariates chosen", na: true,
			want: []string{`table "records", column "score": not a number in 1 row (id 17); it was chosen as a covariate because it is declared numeric or holds numbers`}},
		{name: "a confounder with one n/a, covariates listed", na: true, extra: "  covariates: [age, sex, score]\n",
			want: []string{`column "score": not a number in 1 row (id 17)`}, notWant: "first ids"},
		{name: "a text column listed as a covariate", extra: "  covariates: [age, name]\n",
			want: []string{`column "name": not a number in 300 rows (first ids 1, 2, 3, 4, 5)`}},
		{name: "one control row", control: map[int]bool{42: true},
			want:   []string{`t.sqlite", table "records", column "w": 1 control row (w = 0) among 300; at least 5 are needed in each arm`},
			stdout: chosen},
		{name: "four control rows", control: map[int]bool{1: true, 2: true, 3: true, 4: true},
			want: []string{`4 control rows (w = 0) among 300; at least 5 are needed in each arm`}, stdout: chosen},
		{name: "one control row after skipping", na: true, control: map[int]bool{17: true, 18: true}, extra: "  on_invalid: skip\n",
			want: []string{`1 control row (w = 0) among 299 kept (1 left out by on_invalid: skip); at least 5 are needed`}, stdout: chosen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			csvPath := issueCSV(t, t.TempDir(), tt.na, tt.control)
			_, cfg := importIssueSite(t, csvPath, tt.extra)
			a, err := execute(t, "fit", "--config", cfg)
			if err == nil {
				t.Fatal("fit succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nwant it to contain %q", err, w)
				}
			}
			if tt.notWant != "" && strings.Contains(err.Error(), tt.notWant) {
				t.Errorf("error %q contains %q", err, tt.notWant)
			}
			if out := a.stdout.(*bytes.Buffer).String(); out != tt.stdout {
				t.Errorf("stdout %q, want %q", out, tt.stdout)
			}
			db, err := sql.Open("sqlite", filepath.Join(filepath.Dir(cfg), "t.sqlite"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var runs int
			if err := db.QueryRow(`SELECT count(*) FROM crff_run`).Scan(&runs); err != nil || runs != 0 {
				t.Errorf("%d runs begun (%v), want none", runs, err)
			}
		})
	}
}

// TestFitWarnings checks the warnings fit gives around training: columns
// it did not use, an arm below the soft minimum, and the positivity line
// after training, which names each rule that fails.
func TestFitWarnings(t *testing.T) {
	var out, logs bytes.Buffer
	a := &app{stdout: &out, log: slog.New(slog.NewTextHandler(&logs, nil))}
	recs := &store.Records{
		Layout: store.Layout{Table: "records", Treatment: "w", Covariates: []string{"age", "sex"}, Binary: []bool{false, true}},
		Unused: []store.UnusedColumn{{Name: "name", Reason: "none of its 300 values is a number"}},
		Data:   &estimator.Data{},
	}
	for i := range 300 {
		w := 1.0
		if i%30 == 0 {
			w = 0
		}
		recs.Data.W = append(recs.Data.W, w)
	}
	recs.IDs = make([]store.RowID, 300)
	src := store.Source{DB: "t.sqlite"}
	if err := checkFitRecords(a, src, recs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`level=WARN msg="column not used as a covariate (list site.covariates to choose them)" db=t.sqlite column=name reason="none of its 300 values is a number"`,
		`level=WARN msg="positivity: few rows in a treatment arm; training anyway, but its effects will rest on extrapolation" db=t.sqlite arm=control rows=10 total=300 least=20`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
	if want := "covariates: age (continuous), sex (binary)\nnot a covariate: name (none of its 300 values is a number)\n"; out.String() != want {
		t.Errorf("stdout %q, want %q", out.String(), want)
	}

	tests := []struct {
		name    string
		extreme int // treated rows with a propensity of 0.999
		want    string
	}{
		{"thin arm", 0, "positivity: warning: 10 control rows (w = 0) among 300 (3.3%), below the 20 rows and 5% of the rows each arm should hold. " +
			"The effects rest partly on extrapolation from the other arm; see crff_positivity and crff_overlap\n"},
		{"thin arm and extreme propensities", 16, "positivity: warning: 10 control rows (w = 0) among 300 (3.3%), below the 20 rows and 5% of the rows each arm should hold; " +
			"16 of 300 rows (5.3%) have a propensity outside [0.01, 0.99], above the 5% limit. The effects"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out.Reset()
			eff := &estimator.Effects{Propensity: make([]float64, 300)}
			k := 0
			for i, w := range recs.Data.W {
				eff.Propensity[i] = 0.9
				if w == 1 && k < tt.extreme {
					eff.Propensity[i], k = 0.999, k+1
				}
			}
			if err := recs.WritePositivity(a.stdout, eff.Propensity); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(out.String(), tt.want) || strings.Count(out.String(), "\n") != 1 {
				t.Errorf("positivity line\n%q\nwant one line starting\n%q", out.String(), tt.want)
			}
		})
	}

	// A balanced site says so.
	out.Reset()
	for i := range recs.Data.W {
		recs.Data.W[i] = float64(i % 2)
	}
	half := &estimator.Effects{Propensity: make([]float64, 300)}
	for i := range half.Propensity {
		half.Propensity[i] = 0.5
	}
	if err := recs.WritePositivity(a.stdout, half.Propensity); err != nil {
		t.Fatal(err)
	}
	if want := "positivity: ok: 150 treated and 150 control rows, 0 with a propensity outside [0.01, 0.99]\n"; out.String() != want {
		t.Errorf("positivity line %q, want %q", out.String(), want)
	}
}

// TestWarnThinArms checks the warning before training, whose least is the
// soft minimum that applies: 20 rows, or 5% of the rows when more.
func TestWarnThinArms(t *testing.T) {
	for _, tc := range []struct {
		c    positivity.Counts
		want string // "" for no warning
	}{
		{positivity.Counts{Treated: 955, Control: 45}, "arm=control rows=45 total=1000 least=50"},
		{positivity.Counts{Treated: 12, Control: 288}, "arm=treated rows=12 total=300 least=20"},
		{positivity.Counts{Treated: 950, Control: 50}, ""},
	} {
		var logs bytes.Buffer
		warnThinArms(&app{log: slog.New(slog.NewTextHandler(&logs, nil))}, store.Source{DB: "t.sqlite"}, tc.c)
		if tc.want == "" && logs.Len() > 0 || !strings.Contains(logs.String(), tc.want) {
			t.Errorf("%+v: log %q, want %q", tc.c, logs.String(), tc.want)
		}
	}
}
