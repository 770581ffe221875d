package federation

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

// At level info the coordinator logs a run in a few lines, however many
// rounds it has: envelopes are logged at debug.
func TestCoordinatorIsQuietAtInfo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lineCount := map[int]int{}
	for _, rounds := range []int{8, 40} {
		f := newFed(30, 30, 30)
		cfg := testConfig()
		cfg.Rounds = rounds
		var buf bytes.Buffer
		cc := f.coordinator(cfg)
		cc.Logger = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
		sites := f.start(ctx)
		if _, err := RunCoordinator(ctx, cc, f.net.Endpoint("coord")); err != nil {
			t.Fatal(err)
		}
		waitSites(t, sites)
		lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
		for _, l := range lines {
			var rec struct{ Msg string }
			if err := json.Unmarshal(l, &rec); err != nil {
				t.Fatal(err)
			}
			if rec.Msg == "envelope" {
				t.Fatalf("%d rounds: an envelope logged at info: %s", rounds, l)
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
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lineCount := map[int]int{}
	for _, rounds := range []int{8, 40} {
		f := newFed(30, 30, 30)
		cfg := testConfig()
		cfg.Rounds = rounds
		var buf bytes.Buffer
		f.cfgs[0].Logger = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
		sites := f.start(ctx)
		if _, err := RunCoordinator(ctx, f.coordinator(cfg), f.net.Endpoint("coord")); err != nil {
			t.Fatal(err)
		}
		waitSites(t, sites)
		lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
		trained := map[string]int{}
		for _, l := range lines {
			var rec struct {
				Msg, Model string
				Rounds     int
			}
			if err := json.Unmarshal(l, &rec); err != nil {
				t.Fatal(err)
			}
			if rec.Msg == "model trained" {
				trained[rec.Model] = rec.Rounds
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
