package federation

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

// logLine is what the quiet tests read of a JSON log line.
type logLine struct {
	Msg, Model string
	Rounds     int
}

// infoLines runs a 3-site federation of the given rounds and returns the
// INFO log lines of the coordinator (site < 0) or of site number site.
func infoLines(t *testing.T, rounds, site int) []logLine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := newFed(30, 30, 30)
	cfg := testConfig()
	cfg.Rounds = rounds
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cc := f.coordinator(cfg)
	if site < 0 {
		cc.Logger = logger
	} else {
		f.cfgs[site].Logger = logger
	}
	sites := f.start(ctx)
	if _, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord")); err != nil {
		t.Fatal(err)
	}
	waitSites(t, sites)
	var out []logLine
	for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var rec logLine
		if err := json.Unmarshal(l, &rec); err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
	return out
}

// At level info the coordinator logs a run in a few lines, however many
// rounds it has: envelopes are logged at debug.
func TestCoordinatorIsQuietAtInfo(t *testing.T) {
	lineCount := map[int]int{}
	for _, rounds := range []int{8, 40} {
		lines := infoLines(t, rounds, -1)
		for _, l := range lines {
			if l.Msg == "envelope" {
				t.Fatalf("%d rounds: an envelope logged at info: %+v", rounds, l)
			}
		}
		lineCount[rounds] = len(lines)
		t.Logf("%d rounds of 3 sites: %d lines at info", rounds, len(lines))
	}
	// Lines per model, per run and per site, none per round.
	if lineCount[40] != lineCount[8] {
		t.Errorf("info lines grow with the rounds: %v", lineCount)
	}
}

// A site logs one INFO line per model it helped train, however many rounds
// it answered, and a few per run.
func TestSiteLogsOneLinePerModel(t *testing.T) {
	lineCount := map[int]int{}
	for _, rounds := range []int{8, 40} {
		lines := infoLines(t, rounds, 0)
		trained := map[string]int{}
		for _, l := range lines {
			if l.Msg == "model trained" {
				trained[l.Model] = l.Rounds
			}
		}
		if len(trained) != 3 || trained["propensity"] != rounds || trained["outcome"] != rounds || trained["latent"] != rounds {
			t.Errorf("%d rounds: model trained lines %v, want each of the 3 models with %d rounds", rounds, trained, rounds)
		}
		lineCount[rounds] = len(lines)
		t.Logf("%d rounds: %d lines at info at site1", rounds, len(lines))
	}
	if lineCount[40] != lineCount[8] {
		t.Errorf("info lines grow with the rounds: %v", lineCount)
	}
}
