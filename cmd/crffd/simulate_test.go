package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/crffd/crffd/dataset"
)

func TestSimulateCSV(t *testing.T) {
	dir := t.TempDir()
	if _, err := execute(t, "simulate", "--sources", "3", "--rows", "40", "--delta", "0,4,4", "--replicates", "2", "--out", dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"synth_1.csv", "synth_2.csv"} {
		tab, err := dataset.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if tab.Rows() != 120 || tab.Covariates() != 30 {
			t.Errorf("%s: %d rows × %d covariates, want 120 × 30", name, tab.Rows(), tab.Covariates())
		}
	}
	a, _ := dataset.ReadFile(filepath.Join(dir, "synth_1.csv"))
	b, _ := dataset.ReadFile(filepath.Join(dir, "synth_2.csv"))
	if a.Y[0] == b.Y[0] && a.Y[1] == b.Y[1] {
		t.Error("replicates 1 and 2 look identical: seeds not advanced")
	}
}

func TestSimulateErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"simulate"}, `required flag(s) "out" not set`},
		{[]string{"simulate", "--out", dir, "--delta", "0,x"}, `--delta: "x" is not a number`},
		{[]string{"simulate", "--out", dir, "--sources", "3", "--delta", "0,4"}, "--delta: 2 values for 3 sources"},
		{[]string{"simulate", "--out", dir, "--delta", "1", "--delta-uniform", "0,8"}, "exclude each other"},
		{[]string{"simulate", "--out", dir, "--delta-uniform", "8"}, "want LO,HI"},
		{[]string{"simulate", "--out", dir, "--delta-uniform", "8,0"}, "Δ range [8, 0]"},
		{[]string{"simulate", "--out", dir, "--format", "parquet"}, `--format "parquet"`},
		{[]string{"simulate", "--out", dir, "--replicates", "0"}, "--replicates 0"},
		{[]string{"simulate", "--out", dir, "--sources", "0"}, "0 sources"},
	} {
		_, err := execute(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
}

func TestEvalErrors(t *testing.T) {
	data := filepath.Join(t.TempDir(), "none")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"eval"}, `required flag(s) "data" not set`},
		{[]string{"eval", "--data", data, "--optimizer", "sgd"}, `--optimizer "sgd"`},
		{[]string{"eval", "--data", data, "--sources", "1,x"}, `--sources`},
		{[]string{"eval", "--data", data, "--split", "50,100"}, `--split "50,100": want 3`},
		{[]string{"eval", "--data", data, "--split", "50,-1,99"}, `"-1" is not a non-negative integer`},
		{[]string{"eval", "--data", data, "--replicates", "2-1"}, `--replicates`},
		{[]string{"eval", "--data", data, "--seeds", "-1"}, `--seeds: list "-1": "-1" is not a non-negative integer or range`},
		{[]string{"eval", "--data", data, "--seed", "3", "--seeds", "1-2"}, `--seed and --seeds: give one of them`},
		{[]string{"eval", "--data", data}, `data "` + data + `"`},
	} {
		_, err := execute(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
	if _, err := parseKernelParams([]string{"nu"}); err == nil || !strings.Contains(err.Error(), "want NAME=NUMBER") {
		t.Errorf("kernel param without value: err = %v", err)
	}
	if p, err := parseKernelParams([]string{"nu=2.5"}); err != nil || p["nu"] != 2.5 {
		t.Errorf("nu=2.5: %v, %v", p, err)
	}
}
