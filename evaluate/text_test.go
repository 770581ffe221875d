package evaluate

import (
	"strings"
	"testing"
)

// TestWriteText: the summary table, the doubly robust table with "-" for
// a mode without AIPW figures, the auto candidates most often members
// first, and the count of runs.
func TestWriteText(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	r := &Report{
		Summary: []Summary{
			{Mode: "auto", Sources: 1, N: 2, SqrtPEHEMean: 1.5, SqrtPEHESE: 0.25, ATEErrMean: 0.5, ATEErrSE: 0.125, ATEBiasMean: -0.1,
				AIPWATEErrMean: f(0.3), AIPWATEErrSE: f(0.05), AIPWBiasMean: f(0.01), AIPWCoverage: f(1), AIPWWidthMean: f(1.2),
				BLPRejection: f(0.95), GATESCoverage: f(0.9), GATESWorst: f(0.8), AUTOCCoverage: f(0.85), PolicyCoverage: f(1), AUTOCMean: f(0.5), AUTOCBestMean: f(0.75)},
			{Mode: "tlearner", Sources: 1, N: 2, SqrtPEHEMean: 2, SqrtPEHESE: 0.5, ATEErrMean: 0.75, ATEErrSE: 0.25, ATEBiasMean: 0.2},
		},
		Runs: []Result{
			{Mode: "auto", Sources: 1, Candidates: []Candidate{{Name: "dr/10", Member: true}, {Name: "latent/gaussian", Member: true}}},
			{Mode: "auto", Sources: 1, Candidates: []Candidate{{Name: "dr/10"}, {Name: "latent/gaussian", Member: true}}},
			{Mode: "tlearner", Sources: 1},
		},
		Seconds: 12.34,
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"auto      1        2  1.500 ± 0.250  0.500 ± 0.125  -0.100\n",
		"auto      1        0.300 ± 0.050  +0.010     1.00           1.200       -              -              -\n",
		"tlearner  1        -              -          -              -           -              -              -\n",
		"1        latent/gaussian  2 of 2\n1        dr/10            1 of 2\n",
		"\n3 runs in 12.3 s\n",
		"MODE  SOURCES  BLP REJECTS  GATES COVERAGE  WORST FIFTH  AUTOC COVERAGE  AUTOC  AUTOC (TRUE RANKING)  POLICY COVERAGE\nauto  1        0.95         0.90            0.80         0.85            0.500  0.750                 1.00\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
