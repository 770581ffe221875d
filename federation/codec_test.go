package federation

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
)

// TestConfigFieldsCoverConfig fails when estimator.Config gains a field
// that hello does not carry: sites would silently train with its default
// while the coordinator used another value.
func TestConfigFieldsCoverConfig(t *testing.T) {
	local := map[string]bool{"Workers": true} // how a process runs, not what it computes
	want := 0
	ct := reflect.TypeOf(estimator.Config{})
	for i := range ct.NumField() {
		switch name := ct.Field(i).Name; {
		case local[name]:
		case name == "Seed":
			want += 2 // sent as two 32-bit halves
		default:
			want++
		}
	}
	if len(configFields) != want {
		t.Errorf("hello carries %d config fields, estimator.Config needs %d: add the new field to configFields", len(configFields), want)
	}
	// Every field survives the trip.
	c := estimator.DefaultConfig()
	c.Linear, c.LogOutcome, c.Seed, c.Features = 1.5, estimator.LogAlways, 1<<40+3, 17
	var got estimator.Config
	for _, f := range configFields {
		f.set(&got, f.get(&c))
	}
	c.Workers = 0
	if !reflect.DeepEqual(got, c) {
		t.Errorf("config after hello:\n%+v\nwant\n%+v", got, c)
	}
}

// TestEquivalenceWithLogOutcome repeats the equivalence check with the log
// outcome transform on, which depends on the log moments sent in hello.
func TestEquivalenceWithLogOutcome(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newFed(40, 50)
	for _, d := range f.data {
		for i := range d.Y {
			d.Y[i] += 20 // all positive
		}
	}
	cfg := testConfig()
	cfg.LogOutcome = estimator.LogAlways
	want, _, sites := runEquivalent(ctx, t, f, cfg)
	if !want.Setup.LogY() || !want.Setup.Scaler.LogYValid {
		t.Fatal("the log transform is not on: the test would not exercise the log moments")
	}
	for s, ch := range sites {
		if r := <-ch; r.err != nil {
			t.Fatalf("site %d: %v", s, r.err)
		}
	}
}

// TestScalerFieldsCovered fails when estimator.Scaler gains a field that
// the verdict does not carry to the sites.
func TestScalerFieldsCovered(t *testing.T) {
	s := estimator.Scaler{Mean: []float64{1, 2}, Scale: []float64{3, 4}, YMean: 5, YSD: 6, LogYMean: 7, LogYSD: 8, LogYValid: true, LogYPreferred: true}
	v := reflect.ValueOf(s)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("the test's Scaler leaves %s zero: set every field", v.Type().Field(i).Name)
		}
	}
	e, err := wire.New(wire.Header{RunID: "r", Model: "m", Kind: wire.KindDedupVerdict, Sender: "coord", Recipient: "site1"}, scalerTensors(s))
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeScaler(e, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Errorf("scaler after the verdict:\n%+v\nwant\n%+v", got, s)
	}
}
