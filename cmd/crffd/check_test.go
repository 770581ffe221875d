package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crffd/crffd/balance"
	"github.com/crffd/crffd/store"
)

// confoundedCSV writes n rows of id, age, sex, severity, treated and
// outcome where severity alone drives the treatment (logit e = 1.2·severity)
// and the fields of severity are empty in the rows listed in missing.
func confoundedCSV(t *testing.T, dir string, n int, missing ...int) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(11, 12))
	var b strings.Builder
	b.WriteString("id,age,sex,severity,treated,outcome\n")
	skip := map[int]bool{}
	for _, i := range missing {
		skip[i] = true
	}
	for i := 1; i <= n; i++ {
		age, sex, sev := 50+10*rng.NormFloat64(), rng.IntN(2), rng.NormFloat64()
		w := 0
		if rng.Float64() < 1/(1+math.Exp(-1.2*sev)) {
			w = 1
		}
		s := fmt.Sprintf("%.4f", sev)
		if skip[i] {
			s = ""
		}
		fmt.Fprintf(&b, "%d,%.1f,%d,%s,%d,%.4f\n", i, age, sex, s, w, 2*float64(w)+sev+0.02*age+rng.NormFloat64())
	}
	path := filepath.Join(dir, "patients.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCheckNamesTheImbalancedCovariateFirst is the issue's acceptance: on
// a design with one covariate of large imbalance, crffd check (from a CSV,
// with no YAML) names it first, and weighting mends it; crff_balance holds
// the same.
func TestCheckNamesTheImbalancedCovariateFirst(t *testing.T) {
	dir := t.TempDir()
	csvPath := confoundedCSV(t, dir, 1000, 5, 17)
	db := filepath.Join(dir, "clinic.sqlite")
	if _, err := execute(t, "import", "--db", db, "--table", "patients", "--csv", csvPath, "--header"); err != nil {
		t.Fatal(err)
	}
	a, err := execute(t, "check", "--db", db, "--table", "patients", "--id", "id", "--treatment", "treated", "--outcome", "outcome")
	if err != nil {
		t.Fatal(err)
	}
	out := a.stdout.(*bytes.Buffer).String()
	for _, want := range []string{
		"covariates: age (continuous), sex (binary), severity (continuous)\n",
		"(998 rows; 2 left out for faults)\n",
		"left out: 2 rows for column severity (ids 5, 17)",
		"missing (NULL) fields: severity 2\n",
		"overlap: good\n",
		"stored in crff_balance (scope local)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check printed\n%s\nwant it to contain %q", out, want)
		}
	}
	lines := strings.Split(out, "\n")
	var first string
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "covariate ") && i+1 < len(lines) {
			first = lines[i+1]
			break
		}
	}
	if !strings.HasPrefix(strings.TrimSpace(first), "severity ") || !strings.HasSuffix(first, "balanced by weighting") {
		t.Errorf("first covariate line %q, want severity, balanced by weighting", first)
	}

	s, err := store.Open(context.Background(), db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, err := s.ReadBalance(context.Background(), store.ScopeLocal)
	if err != nil {
		t.Fatal(err)
	}
	top := b.Report.Ranked()[0]
	if top.Name != "severity" || math.Abs(top.SMD) < 0.8 || math.Abs(top.WSMD) > balance.Threshold {
		t.Errorf("crff_balance: most imbalanced %s, SMD %.3f then %.3f; want severity, ≥ 0.8 then ≤ %g", top.Name, top.SMD, top.WSMD, balance.Threshold)
	}
	if b.LeftOut != 2 || len(b.Missing) != 3 || b.Missing[2] != 2 {
		t.Errorf("crff_balance: %d left out, missing %v; want 2 and [0 0 2]", b.LeftOut, b.Missing)
	}
}

// TestQuickFlags checks that fit and check read the records named by
// --db, --table, --id, --treatment and --outcome, with no configuration
// file: the error of a file with too few control rows names the file, the
// table and the treatment column given on the command line.
func TestQuickFlags(t *testing.T) {
	dir := t.TempDir()
	csvPath := issueCSV(t, dir, false, map[int]bool{1: true, 2: true})
	db := filepath.Join(dir, "few.sqlite")
	if _, err := execute(t, "import", "--db", db, "--table", "visits", "--csv", csvPath, "--header"); err != nil {
		t.Fatal(err)
	}
	_, err := execute(t, "fit", "--db", db, "--table", "visits", "--id", "id", "--treatment", "w", "--outcome", "y", "--covariates", "age,sex")
	if err == nil || !strings.Contains(err.Error(), `few.sqlite", table "visits", column "w": 2 control rows (w = 0) among 300`) {
		t.Errorf("fit: %v", err)
	}
	a, err := execute(t, "check", "--db", db, "--table", "visits", "--id", "id", "--treatment", "w", "--outcome", "y", "--covariates", "age,sex")
	if err != nil {
		t.Fatal(err)
	}
	out := a.stdout.(*bytes.Buffer).String()
	for _, want := range []string{"covariates: age (continuous), sex (binary)\n", "arms: 298 treated, 2 control", "overlap: poor: 2 control rows"} {
		if !strings.Contains(out, want) {
			t.Errorf("check printed\n%s\nwant it to contain %q", out, want)
		}
	}
	for _, cmd := range []string{"fit", "check"} {
		if _, err := execute(t, cmd, "--table", "visits"); err == nil || !strings.Contains(err.Error(), "site.db is not set") {
			t.Errorf("%s without --db or --config: %v", cmd, err)
		}
	}
}
