package dataset

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// ihdpDir is the shared IHDP benchmark, relative to this package's directory.
const ihdpDir = "../../shared/data/ihdp"

func TestIHDPFiles(t *testing.T) {
	if _, err := os.Stat(ihdpDir); errors.Is(err, fs.ErrNotExist) {
		t.Skipf("IHDP data not found at %s", ihdpDir)
	}
	for rep := 1; rep <= 10; rep++ {
		path := filepath.Join(ihdpDir, "ihdp_npci_"+strconv.Itoa(rep)+".csv")
		t.Run(filepath.Base(path), func(t *testing.T) {
			tab, err := ReadFile(path)
			if errors.Is(err, fs.ErrNotExist) {
				t.Skipf("%s not found", path)
			}
			if err != nil {
				t.Fatal(err)
			}
			if tab.Rows() != 747 || tab.Covariates() != 25 {
				t.Fatalf("%d rows × %d covariates, want 747 × 25", tab.Rows(), tab.Covariates())
			}

			src, err := tab.Sources(249)
			if err != nil {
				t.Fatal(err)
			}
			if len(src) != 3 {
				t.Fatalf("%d sources of 249 rows, want 3", len(src))
			}
			for s, st := range src {
				tr, te, va, err := st.Split(50, 100, 99)
				if err != nil {
					t.Fatalf("source %d: %v", s+1, err)
				}
				if tr.Rows() != 50 || te.Rows() != 100 || va.Rows() != 99 {
					t.Errorf("source %d split %d/%d/%d, want 50/100/99", s+1, tr.Rows(), te.Rows(), va.Rows())
				}
				// The first test row of source s is row 249*s + 51 of the file.
				if te.Y[0] != tab.Y[249*s+50] {
					t.Errorf("source %d: test rows do not start at file row %d", s+1, 249*s+51)
				}
			}

			schema, err := InferSchema(tab)
			if err != nil {
				t.Fatal(err)
			}
			if schema.BinaryOutcome {
				t.Errorf("outcome inferred binary")
			}
			for j, bin := range schema.Binary {
				// x1..x6 are continuous; x14 is coded 1/2, so it is not 0/1.
				want := j >= 6 && j != 13
				if bin != want {
					t.Errorf("x%d: binary = %t, want %t", j+1, bin, want)
				}
			}

			var treated int
			for _, w := range tab.W {
				treated += int(w)
			}
			if treated == 0 || treated == tab.Rows() {
				t.Errorf("%d of %d rows treated, want both arms", treated, tab.Rows())
			}

			var buf bytes.Buffer
			if err := Write(&buf, tab); err != nil {
				t.Fatal(err)
			}
			back, err := Read(&buf, "rewritten")
			if err != nil {
				t.Fatal(err)
			}
			if !equalTables(back, tab) {
				t.Errorf("Write/Read round trip changed the table")
			}
		})
	}
}
