package ihdp_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/crffd/crffd/dataset"
	"github.com/crffd/crffd/dataset/ihdp"
)

func TestEmbeddedReplicates(t *testing.T) {
	for n := 1; n <= 10; n++ {
		name := fmt.Sprintf("ihdp_npci_%d.csv", n)
		b, err := fs.ReadFile(ihdp.Files, name)
		if err != nil {
			t.Fatal(err)
		}
		tab, err := dataset.Read(bytes.NewReader(b), name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if tab.Rows() != 747 || tab.Covariates() != 25 {
			t.Errorf("%s: %d rows and %d covariates, want 747 and 25", name, tab.Rows(), tab.Covariates())
		}
	}
}

// TestEmbeddedIHDPMatchesShared checks the shipped copy against the
// development machine's, when it is there.
func TestEmbeddedIHDPMatchesShared(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "data", "ihdp")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("no %s", dir)
	}
	for n := 1; n <= 10; n++ {
		name := fmt.Sprintf("ihdp_npci_%d.csv", n)
		want, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := fs.ReadFile(ihdp.Files, name)
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s", name, dir)
		}
	}
}
