package main

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestParseGridPoint(t *testing.T) {
	k, rest, err := parseGridPoint([]string{"nu=1.5", "features=100", "linear=0"})
	if err != nil || k.Features != 100 || k.Linear == nil || *k.Linear != 0 || !slices.Equal(rest, []string{"nu=1.5"}) {
		t.Errorf("got %+v, %v, %v; want D 100, γ 0 and nu=1.5 left", k, rest, err)
	}
	if k, rest, err := parseGridPoint(nil); err != nil || k.Features != 0 || k.Linear != nil || len(rest) != 0 {
		t.Errorf("no fields: %+v, %v, %v; want nothing set", k, rest, err)
	}
	for _, tc := range []struct{ field, want string }{
		{"features=0", `features="0": want a whole number of random frequencies ≥ 1`},
		{"features=1.5", `features="1.5"`},
		{"linear=-1", `linear="-1": want a weight γ ≥ 0`},
		{"linear=NaN", `linear="NaN"`},
		{"linear=+Inf", `linear="+Inf"`},
	} {
		if _, _, err := parseGridPoint([]string{tc.field}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.field, err, tc.want)
		}
	}
}

// TestGridSettings reads kernel.grid from the file and from the
// environment, which overrides it: each point is the first kernel again at
// its own D and γ, a candidate of its own name.
func TestGridSettings(t *testing.T) {
	labels := func(a *app) []string {
		t.Helper()
		c, err := a.choiceSettings(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, k := range c.kernels {
			out = append(out, kernelLabel(k))
		}
		return out
	}
	file := writeConfig(t, "kernel:\n  name: laplacian\n  grid: [features=10:linear=0, linear=2]\n")
	a, err := execute(t, "version", "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := labels(a), []string{"laplacian", "laplacian(features=10,linear=0)", "laplacian(linear=2)"}; !slices.Equal(got, want) {
		t.Errorf("from the file: %v, want %v", got, want)
	}
	t.Setenv("CRFFD_KERNEL_GRID", "features=30")
	if a, err = execute(t, "version", "--config", file); err != nil {
		t.Fatal(err)
	}
	if got, want := labels(a), []string{"laplacian", "laplacian(features=30)"}; !slices.Equal(got, want) {
		t.Errorf("from the environment: %v, want %v", got, want)
	}
}
