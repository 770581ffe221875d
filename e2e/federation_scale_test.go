package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/crffd/crffd/estimator"
)

var finishedLine = regexp.MustCompile(`msg="run finished" .*rounds=(\d+) round_seconds=([0-9.e+-]+)`)

// TestFederationScale runs CRFFD_E2E_SITES site daemons (default 3; the
// issue's scale figure is 20) and a coordinator over grpc, and reports
// seconds per round against the simulated federation on the same rows,
// and each site's payload bytes per round, which must be the same at every
// site: the site's effective weights and shared parameters down, its
// gradients up, independent of the number of sites.
func TestFederationScale(t *testing.T) {
	sites := 3
	if v := os.Getenv("CRFFD_E2E_SITES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 {
			t.Fatalf("CRFFD_E2E_SITES=%q", v)
		}
		sites = n
	}
	const rows = 100
	dir := sandbox(t, sites, rows, "grpc")
	start := time.Now()
	coord := runFederation(t, dir, sites, true)
	wall := time.Since(start)
	run := checkSiteResults(t, dir, sites)
	m := finishedLine.FindStringSubmatch(coord.err.String())
	if m == nil {
		t.Fatalf("no run finished line:\n%s", coord.err.String())
	}
	rounds, _ := strconv.Atoi(m[1])
	roundSeconds, _ := strconv.ParseFloat(m[2], 64)

	// Bytes per site per training round of each model, from each site's
	// audit: the same at every site.
	perRound := map[string]float64{}
	for k := 1; k <= sites; k++ {
		db := openDB(t, filepath.Join(dir, fmt.Sprintf("site%d.sqlite", k)))
		rows, err := db.Query(`SELECT model, SUM(bytes) * 1.0 / COUNT(DISTINCT round) FROM crff_audit
			WHERE run = ? AND model != '' AND ((kind = 'weights' AND direction = 'received') OR (kind = 'gradient' AND direction = 'sent'))
			GROUP BY model`, run)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var model string
			var b float64
			if err := rows.Scan(&model, &b); err != nil {
				t.Fatal(err)
			}
			if k == 1 {
				perRound[model] = b
			} else if b != perRound[model] {
				t.Errorf("site%d: %.0f payload bytes per %s round, site1 %.0f", k, b, model, perRound[model])
			}
		}
		rows.Close()
	}

	// The simulated federation on the same rows, with the same kernel plugin.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kc, _, recs := sandboxRecords(ctx, t, dir, sites)
	var data []*estimator.Data
	schema := recs[0].Schema
	for _, r := range recs {
		data = append(data, r.Data)
	}
	cfg := estimator.DefaultConfig()
	cfg.Features, cfg.Latent, cfg.Rounds, cfg.Samples = 20, 3, 10, 20
	simStart := time.Now()
	model, err := estimator.Fit(ctx, data, schema, kc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sim := time.Since(simStart).Seconds()
	simRounds := model.Propensity.Rounds + model.Outcome.Rounds + model.Latent.Rounds
	// What a site's W^s, shared parameters and gradients weigh: 8 bytes per
	// value, both ways, plus the round, noise, loss and rows scalars.
	report := ""
	for _, k := range estimator.Kinds {
		values := 2
		for _, b := range model.Setup.Blocks(k) {
			values += b.Rows * b.Cols
		}
		for _, p := range model.Setup.SharedParams(k) {
			values += p.Size
		}
		if want := float64(2 * 8 * values); perRound[k.String()] != want {
			t.Errorf("%s: %.0f payload bytes per site per round, want %.0f (effective weights plus gradients)", k, perRound[k.String()], want)
		}
		report += fmt.Sprintf(" %s %.0f;", k, perRound[k.String()])
	}
	t.Logf("%d sites × %d rows over grpc: %d rounds, %.4f s per round (%.1f s wall, incl. start-up and scoring); simulated federation: %d rounds, %.4f s per round; payload bytes per site per round:%s",
		sites, rows, rounds, roundSeconds/float64(rounds), wall.Seconds(), simRounds, sim/float64(simRounds), report)
}
