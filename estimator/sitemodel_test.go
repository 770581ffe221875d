package estimator

import (
	"context"
	"math"
	"strings"
	"testing"
)

// TestSiteModelScoresLikeFullModel checks that a site rebuilding its model
// from its own weights gets bit-identical effects to the federation's model.
func TestSiteModelScoresLikeFullModel(t *testing.T) {
	ctx := context.Background()
	schema := Schema{Binary: []bool{true, false, false}}
	sites := toySites(3, 30, schema)
	cfg := smallConfig()
	m, err := Fit(ctx, sites, schema, GaussianSpectral{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const s = 1
	own := map[Kind]SiteWeights{}
	for _, k := range Kinds {
		if own[k], err = m.Trained(k).Own(s); err != nil {
			t.Fatal(err)
		}
	}
	sm, err := NewSiteModel(m.Setup, s, own)
	if err != nil {
		t.Fatal(err)
	}
	want, err := m.Effects(ctx, s, sites[s])
	if err != nil {
		t.Fatal(err)
	}
	got, err := sm.Effects(ctx, s, sites[s])
	if err != nil {
		t.Fatal(err)
	}
	for i := range want.CATE {
		if math.Float64bits(got.CATE[i]) != math.Float64bits(want.CATE[i]) || got.Upper[i] != want.Upper[i] {
			t.Fatalf("row %d: site model CATE %v, federation model %v", i, got.CATE[i], want.CATE[i])
		}
	}
	if _, err := sm.Effects(ctx, 0, sites[0]); err == nil || !strings.Contains(err.Error(), "no site 0") {
		t.Errorf("scoring as another site: err = %v", err)
	}
	delete(own[Outcome].Weights, "beta1")
	if _, err := NewSiteModel(m.Setup, s, own); err == nil || !strings.Contains(err.Error(), `lacks weight block "beta1"`) {
		t.Errorf("missing block: err = %v", err)
	}
}
