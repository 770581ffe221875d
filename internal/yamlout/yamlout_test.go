package yamlout

import (
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestMarshalQuotes: values that plain YAML would misread (a colon and a
// space, a number, a boolean, a comment mark) read back as the strings
// they are, and the header and comments are kept.
func TestMarshalQuotes(t *testing.T) {
	values := []string{"a: b", "123", "true", "y", "#x", "dir with space/site.sqlite", "'quoted'", "- item"}
	var fields []Field
	for i, v := range values {
		fields = append(fields, Field{Key: string(rune('a' + i)), Value: v})
	}
	out, err := Marshal("# header", Field{Key: "section", Value: fields, Comment: "# above"},
		Field{Key: "range", Value: FlowPair{-8, 24.5}})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Section map[string]any
		Range   []float64
	}
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v in\n%s", err, out)
	}
	for i, v := range values {
		if g := got.Section[string(rune('a'+i))]; g != v {
			t.Errorf("%q read back as %#v in\n%s", v, g, out)
		}
	}
	if len(got.Range) != 2 || got.Range[0] != -8 || got.Range[1] != 24.5 {
		t.Errorf("range read back as %v", got.Range)
	}
	if s := string(out); s[:len("# header\n# above\nsection:\n")] != "# header\n# above\nsection:\n" {
		t.Errorf("comments lost:\n%s", s)
	}
}
