package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/viper"
	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/dataset"
	"github.com/crffd/crffd/store"
	"github.com/crffd/crffd/synth"
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
		{[]string{"simulate", "--out", dir, "--design", "quadratic"},
			`--design "quadratic": want one of paper, linear-constant, linear-varying, lognormal, binary`},
		{[]string{"simulate", "--out", dir, "--design", "linear-constant", "--binary-outcome"},
			"--binary-outcome applies to --design paper only; --design binary is a binary-outcome design of its own"},
		{[]string{"simulate", "--out", dir, "--design", "binary", "--binary-outcome", "--format", "sqlite"},
			"--binary-outcome applies to --design paper only"},
		{[]string{"simulate", "--out", dir, "--design", "lognormal", "--sources", "1", "--delta", "1e4"},
			"synth: invalid design: design lognormal, source 1 with Δ = 10000"},
	} {
		_, err := execute(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
	// A bad design is refused before the output directory is made.
	out := filepath.Join(dir, "new")
	for _, args := range [][]string{{"--design", "Paper"}, {"--design", "binary", "--binary-outcome"}} {
		if _, err := execute(t, slices.Concat([]string{"simulate", "--out", out}, args)...); err == nil {
			t.Errorf("%v: no error", args)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%v: %s made or unreadable (%v)", args, out, err)
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
		{[]string{"eval", "--data", data, "--split", "50,100"}, `--split 50,100: want 3 non-negative numbers of rows`},
		{[]string{"eval", "--data", data, "--split", "50,-1,99"}, `--split 50,-1,99: want 3 non-negative numbers of rows`},
		{[]string{"eval", "--data", data, "--split", "50,x,99"}, `invalid argument "50,x,99" for "--split" flag`},
		{[]string{"eval", "--data", data, "--epsilon", "1,four"}, `invalid argument "1,four" for "--epsilon" flag`},
		{[]string{"eval", "--data", data, "--replicates", "2-1"}, `--replicates`},
		{[]string{"eval", "--data", data, "--seeds", "-1"}, `--seeds: list "-1": "-1" is not a non-negative integer or range`},
		{[]string{"eval", "--data", data, "--seed", "3", "--seeds", "1-2"}, `--seed and --seeds: give one of them`},
		{[]string{"eval", "--data", data, "--crossfit", "--folds", "1"}, `--folds: 1 folds: want 0 (the default, 5) or at least 2`},
		{[]string{"eval", "--data", data}, `data "` + data + `"`},
	} {
		_, err := execute(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
}

// sha256File returns the hex SHA-256 of the file at path.
func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// The paper's design is the default, and --design paper writes the same
// bytes as crffd did before --design existed.
func TestSimulatePaperUnchanged(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // SHA-256 of synth_1.csv, as written before --design
	}{
		{[]string{"--sources", "3", "--rows", "200", "--delta", "0,4,4"},
			"04def63ba915c79204aad957494a110c3fb3ccbfd43aff3132d0385443eb0b6b"},
		{[]string{"--sources", "2", "--rows", "100", "--seed", "7", "--binary-outcome"},
			"641a6dbb03a0f3e435dc42a5ec17c46b81b3b1b4d2934cc51d49d8e5c5dc8117"},
	} {
		for _, design := range [][]string{nil, {"--design", "paper"}} {
			dir := t.TempDir()
			args := slices.Concat([]string{"simulate", "--out", dir}, tc.args, design)
			if _, err := execute(t, args...); err != nil {
				t.Fatal(err)
			}
			if got := sha256File(t, filepath.Join(dir, "synth_1.csv")); got != tc.want {
				t.Errorf("%v: synth_1.csv has SHA-256 %s, want %s", args, got, tc.want)
			}
		}
	}
}

// documentedATE is the true population ATE at Δ = 0 that the help of
// crffd simulate states for each simple design.
var documentedATE = map[string]float64{
	"linear-constant": 2,
	"linear-varying":  2,
	"lognormal":       2.0251,
	"binary":          0.2060,
}

func TestSimulateDesignsCSV(t *testing.T) {
	const rows = 20000
	for _, design := range []string{"linear-constant", "linear-varying", "lognormal", "binary"} {
		t.Run(design, func(t *testing.T) {
			dir := t.TempDir()
			a, err := execute(t, "simulate", "--design", design, "--sources", "2", "--rows", "10000", "--replicates", "2", "--out", dir)
			if err != nil {
				t.Fatal(err)
			}
			if out := a.stdout.(*bytes.Buffer).String(); !strings.Contains(out, "design "+design+", true ATE of the rows") {
				t.Errorf("output %q does not name the design and its ATE", out)
			}
			tab, err := dataset.ReadFile(filepath.Join(dir, "synth_1.csv"))
			if err != nil {
				t.Fatal(err)
			}
			if tab.Rows() != rows || tab.Covariates() != 3 {
				t.Fatalf("synth_1.csv: %d rows × %d covariates, want %d × 3", tab.Rows(), tab.Covariates(), rows)
			}
			// Columns are age, sex, score: sex binary, age around 50.
			schema, err := dataset.InferSchema(tab)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(schema.Binary, []bool{false, true, false}) || schema.BinaryOutcome != (design == "binary") {
				t.Errorf("schema %+v, want sex binary and a binary outcome only for design binary", schema)
			}
			var age, ate, ate2 float64
			for i, tau := range tab.Tau() {
				age += tab.X.At(i, 0)
				ate += tau
				ate2 += tau * tau
			}
			age /= rows
			ate /= rows
			se := math.Sqrt((ate2/rows - ate*ate) / rows)
			if math.Abs(age-50) > 0.5 {
				t.Errorf("mean of column 1 (age) %.2f, want about 50", age)
			}
			if want := documentedATE[design]; math.Abs(ate-want) > 5*se+5e-5 {
				t.Errorf("true ATE of the rows %.4f, documented %.4f (se %.4f)", ate, want, se)
			}
			if design == "linear-constant" && slices.ContainsFunc(tab.Tau(), func(v float64) bool { return v != 2 }) {
				t.Error("linear-constant: mu1 - mu0 is not 2 in every row after Write and Read")
			}
			// Sources are consecutive blocks ready for crffd eval.
			if _, err := tab.Sources(10000); err != nil {
				t.Error(err)
			}
			// The same seed writes the same file; the next replicate differs.
			again := t.TempDir()
			if _, err := execute(t, "simulate", "--design", design, "--sources", "2", "--rows", "10000", "--out", again); err != nil {
				t.Fatal(err)
			}
			first := sha256File(t, filepath.Join(dir, "synth_1.csv"))
			if sha256File(t, filepath.Join(again, "synth_1.csv")) != first {
				t.Error("the same seed wrote different files")
			}
			if sha256File(t, filepath.Join(dir, "synth_2.csv")) == first {
				t.Error("replicates 1 and 2 are identical: seeds not advanced")
			}
		})
	}
}

// A simulated site of a simple design names its covariates and reads as
// crffd fit reads it, through the written siteK.yaml.
func TestSimulateDesignsSQLite(t *testing.T) {
	for _, design := range []string{"linear-constant", "binary"} {
		t.Run(design, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := execute(t, "simulate", "--design", design, "--sources", "2", "--rows", "300", "--delta", "0,1", "--format", "sqlite", "--out", dir); err != nil {
				t.Fatal(err)
			}
			want, err := synth.Generate(synth.Design{Name: design, Sources: 2, Rows: 300, Delta: []float64{0, 1}, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			for k := range 2 {
				cfg := filepath.Join(dir, []string{"site1.yaml", "site2.yaml"}[k])
				v := viper.New()
				v.SetConfigFile(cfg)
				if err := v.ReadInConfig(); err != nil {
					t.Fatal(err)
				}
				a := &app{v: v, configFile: cfg}
				src, err := a.conf().SiteSource()
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				db, err := store.Open(ctx, src.DB, store.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				recs, err := db.ReadRecords(ctx, src)
				if err != nil {
					t.Fatal(err)
				}
				if got := recs.Layout.Covariates; !slices.Equal(got, []string{"age", "sex", "score"}) {
					t.Errorf("site%d: covariates %v, want age, sex, score", k+1, got)
				}
				if !slices.Equal(recs.Schema.Binary, []bool{false, true, false}) || recs.Schema.BinaryOutcome != (design == "binary") {
					t.Errorf("site%d: schema %+v", k+1, recs.Schema)
				}
				if recs.Len() != 300 || !mat.Equal(recs.Data.X, want[k].X) ||
					!slices.Equal(recs.Data.Y, want[k].Y) || !slices.Equal(recs.Data.W, want[k].W) {
					t.Errorf("site%d: records differ from synth.Generate's source %d", k+1, k+1)
				}
			}
		})
	}
}
