package dataset

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzRead checks that Read never panics and that whatever it accepts is a
// valid table that survives a Write/Read round trip bit for bit, and whose
// written form is a fixed point of Write∘Read. The seed corpus lives in
// testdata/fuzz/FuzzRead.
func FuzzRead(f *testing.F) {
	f.Add([]byte("1,5.5,4.25,3,6.75,-0.5,1,2\n0,6,7,-0,1,0.125,0,1\n"))
	f.Add([]byte("0,1,2,3,4,5\r\n"))
	f.Add([]byte("1,2,3,4,5,NaN\n"))
	f.Add([]byte("1,2,3,4,5\n"))
	f.Add([]byte("\"1\",2,3,4,5,\"6\"\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		tab, err := Read(bytes.NewReader(in), "fuzz")
		if err != nil {
			if tab != nil {
				t.Fatalf("Read returned a table and error %v", err)
			}
			if !strings.HasPrefix(err.Error(), "fuzz: ") {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		if err := tab.Validate(); err != nil {
			t.Fatalf("Read returned an invalid table: %v", err)
		}
		var first bytes.Buffer
		if err := Write(&first, tab); err != nil {
			t.Fatalf("Write of a table Read accepted: %v", err)
		}
		written := first.String()
		back, err := Read(&first, "rewritten")
		if err != nil {
			t.Fatalf("Read of Write output %q: %v", written, err)
		}
		if !equalTables(back, tab) {
			t.Fatalf("round trip changed the table: %q", written)
		}
		var second bytes.Buffer
		if err := Write(&second, back); err != nil {
			t.Fatal(err)
		}
		if second.String() != written {
			t.Fatalf("Write is not stable:\n%q\n%q", written, second.String())
		}
	})
}
