package estimator

import (
	"context"
	"testing"
)

func TestWithProgress(t *testing.T) {
	schema := Schema{Binary: []bool{true, false, false}}
	sites := toySites(2, 30, schema)
	cfg := smallConfig()
	var got []Progress
	ctx := WithProgress(context.Background(), func(p Progress) { got = append(got, p) })
	m, err := Fit(ctx, sites, schema, GaussianSpectral{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := m.Propensity.Rounds + m.Outcome.Rounds + m.Latent.Rounds
	if len(got) != want {
		t.Fatalf("%d progress reports for %d rounds", len(got), want)
	}
	last := got[len(got)-1]
	if last.Model != Latent || last.Round != m.Latent.Rounds || last.MaxRounds != cfg.Rounds {
		t.Errorf("last report %+v, want the latent model's round %d of at most %d", last, m.Latent.Rounds, cfg.Rounds)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Model == got[i-1].Model && got[i].Round != got[i-1].Round+1 {
			t.Fatalf("report %d: round %d after %d", i, got[i].Round, got[i-1].Round)
		}
	}
}

func TestWithScoringProgress(t *testing.T) {
	schema := Schema{Binary: []bool{true, false, false}}
	sites := toySites(1, 300, schema)
	cfg := smallConfig()
	cfg.Samples = 30 // chunks of effectChunk/30 rows
	m, err := Fit(context.Background(), sites, schema, GaussianSpectral{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got [][2]int
	ctx := WithScoringProgress(context.Background(), func(done, total int) { got = append(got, [2]int{done, total}) })
	if _, err := m.Effects(ctx, 0, sites[0]); err != nil {
		t.Fatal(err)
	}
	// Chunks scored on every core: one report per chunk, as each
	// finishes, counting the rows scored so far.
	rows := effectChunk / cfg.Samples
	chunks := (300 + rows - 1) / rows
	if chunks < 2 || 300%rows == 0 {
		t.Fatalf("%d chunks of %d rows: the test needs several, and a last one smaller", chunks, rows)
	}
	if len(got) != chunks || got[chunks-1] != [2]int{300, 300} {
		t.Fatalf("reports %v, want %d ending with 300 of 300", got, chunks)
	}
	for i, r := range got {
		if r[1] != 300 || (i > 0 && r[0] <= got[i-1][0]) {
			t.Fatalf("reports %v: want rising counts of 300", got)
		}
		if last := 300 - (chunks-1)*rows; r[0]%rows != 0 && (r[0]-last)%rows != 0 {
			t.Fatalf("reports %v: %d is not a sum of chunk sizes", got, r[0])
		}
	}
}
