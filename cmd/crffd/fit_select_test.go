package main

import (
	"context"
	"slices"
	"testing"

	"github.com/crffd/crffd/pipeline"
)

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
		for _, k := range c.Kernels {
			out = append(out, pipeline.KernelLabel(k))
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
