package e2e

import (
	"regexp"
	"strings"
	"testing"
)

// auditLine is one row of crffd privacy audit's table.
var auditLine = regexp.MustCompile(`(?m)^(propensity|outcome|latent)\s+(every row|Poisson q=[0-9.]+)\s+(add/remove|replace-one)\s+(\d+)\s+([0-9.]+)\s+\S+\s+([12])\s+ok$`)

// TestPrivacyAudit: crffd privacy audit on a simulated site's own rows
// reports every model within its bound, in full batches and, on a site
// larger than model.batch_size, in Poisson samples of rate B/n; each
// add/remove ratio reaches 1 (a row of norm above the clip norm moved the
// sum by exactly C), so the audit measured something.
func TestPrivacyAudit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rows  int
		extra string
		lines int
	}{
		{"full batch", 120, smallModel, 6},
		{"mini-batch", 400, smallModel + "  batch_size: 256\n", 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cfg := simulateSite(t, tc.rows, tc.extra)
			r := crffd(t, nil, "privacy", "audit", "--config", cfg, "--rows", "4").mustSucceed(t)
			got := auditLine.FindAllStringSubmatch(r.stdout, -1)
			if len(got) != tc.lines || !strings.Contains(r.stdout, "every ratio is within its bound") {
				t.Fatalf("%d audit lines, want %d:\n%s", len(got), tc.lines, r.stdout)
			}
			for _, m := range got {
				if m[3] == "add/remove" && m[5] != "1.0000" {
					t.Errorf("%s %s %s: ratio %s, want 1 (a row clipped to C moves the sum by C)", m[1], m[2], m[3], m[5])
				}
			}
			if tc.lines == 12 && !strings.Contains(r.stdout, "Poisson q=0.64") {
				t.Errorf("no Poisson batches of rate 256/400:\n%s", r.stdout)
			}
		})
	}
}
