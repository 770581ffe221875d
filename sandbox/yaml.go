package sandbox

import (
	"bytes"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// field is one key of a YAML mapping, with the comment lines above it.
type field struct {
	key     string
	value   any // a scalar, a []string, a flow pair of numbers, or []field
	comment string
}

// flowPair is a pair of numbers written [LO, HI] on one line.
type flowPair [2]float64

// node returns the YAML node of v.
func node(v any) (*yaml.Node, error) {
	switch v := v.(type) {
	case []field:
		m := &yaml.Node{Kind: yaml.MappingNode}
		for _, f := range v {
			val, err := node(f.value)
			if err != nil {
				return nil, err
			}
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: f.key, HeadComment: f.comment}, val)
		}
		return m, nil
	case string:
		// Set as a string outright: the encoder would quote a value such
		// as y, which YAML 1.1 read as a boolean, and crffd's reader
		// (YAML 1.2) reads as the string it is.
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}, nil
	case flowPair:
		n := &yaml.Node{}
		if err := n.Encode([]float64{v[0], v[1]}); err != nil {
			return nil, err
		}
		n.Style = yaml.FlowStyle
		return n, nil
	}
	n := &yaml.Node{}
	if err := n.Encode(v); err != nil {
		return nil, err
	}
	return n, nil
}

// marshal returns fields as a YAML document indented by two spaces,
// headed by the comment lines of header.
func marshal(header string, fields ...field) ([]byte, error) {
	if header != "" && len(fields) > 0 {
		fields[0].comment = strings.TrimSuffix(header+"\n"+fields[0].comment, "\n")
	}
	n, err := node(fields)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	return b.Bytes(), nil
}
