package e2e

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestCSVToEstimateInThreeCommands runs the README's "From a CSV file":
// import, check and fit on examples/patients.csv with no YAML. The check
// names severity, the confounder, first and weighting balances it; fit's
// AIPW interval covers the simulated ATE of 2, which the raw difference of
// means (2.74) misses.
func TestCSVToEstimateInThreeCommands(t *testing.T) {
	db := filepath.Join(t.TempDir(), "clinic.sqlite")
	csvPath, err := filepath.Abs(filepath.Join("..", "examples", "patients.csv"))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"--db", db, "--table", "patients", "--id", "id", "--treatment", "treated", "--outcome", "outcome"}
	crffd(t, nil, "import", "--db", db, "--table", "patients", "--csv", csvPath, "--header").mustSucceed(t)
	check := crffd(t, nil, append([]string{"check"}, names...)...).mustSucceed(t)
	lines := strings.Split(check.stdout, "\n")
	first := ""
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "covariate ") && i+1 < len(lines) {
			first = strings.Join(strings.Fields(lines[i+1]), " ")
		}
	}
	if !strings.HasPrefix(first, "severity continuous") || !strings.HasSuffix(first, "balanced by weighting") {
		t.Errorf("check's first covariate: %q, want severity, balanced by weighting\n%s", first, check.stdout)
	}
	if !strings.Contains(check.stdout, "overlap: good\n") {
		t.Errorf("check printed\n%s\nwant overlap: good", check.stdout)
	}
	fit := crffd(t, []string{"CRFFD_MODEL_SEED=1"}, append([]string{"fit"}, names...)...).mustSucceed(t)
	m := regexp.MustCompile(`local ATE (\S+), 95% interval \[(\S+), (\S+)\] \(AIPW`).FindStringSubmatch(fit.stdout)
	if m == nil {
		t.Fatalf("fit printed no AIPW ATE:\n%s", fit.stdout)
	}
	lo, _ := strconv.ParseFloat(m[2], 64)
	hi, _ := strconv.ParseFloat(m[3], 64)
	if !(lo <= 2 && 2 <= hi) || hi-lo > 0.6 {
		t.Errorf("AIPW interval [%v, %v]: want it to cover the true ATE 2 and be narrower than 0.6", lo, hi)
	}
	if !strings.Contains(fit.stdout, "severity") || !strings.Contains(fit.stdout, "overlap: good") {
		t.Errorf("fit does not print the balance check:\n%s", fit.stdout)
	}
	if n := queryFloat(t, openDB(t, db), `SELECT count(*) FROM crff_balance WHERE scope = 'local'`); n != 3 {
		t.Errorf("crff_balance holds %v local rows, want 3", n)
	}
}
