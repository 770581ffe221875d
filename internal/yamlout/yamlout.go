// Package yamlout writes configuration files for people to read: YAML
// mappings in the order given, with comment lines above keys, strings
// always strings, and pairs of numbers on one line.
package yamlout

import (
	"bytes"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Field is one key of a YAML mapping, with the comment lines above it.
type Field struct {
	Key     string
	Value   any // a scalar, a []string, a FlowPair, or []Field
	Comment string
}

// FlowPair is a pair of numbers written [LO, HI] on one line.
type FlowPair [2]float64

// node returns the YAML node of v.
func node(v any) (*yaml.Node, error) {
	switch v := v.(type) {
	case []Field:
		m := &yaml.Node{Kind: yaml.MappingNode}
		for _, f := range v {
			val, err := node(f.Value)
			if err != nil {
				return nil, err
			}
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: f.Key, HeadComment: f.Comment}, val)
		}
		return m, nil
	case string:
		// Set as a string outright: the encoder would quote a value such
		// as y, which YAML 1.1 read as a boolean, and crffd's reader
		// (YAML 1.2) reads as the string it is.
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}, nil
	case FlowPair:
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

// Marshal returns fields as a YAML document indented by two spaces,
// headed by the comment lines of header.
func Marshal(header string, fields ...Field) ([]byte, error) {
	if header != "" && len(fields) > 0 {
		fields[0].Comment = strings.TrimSuffix(header+"\n"+fields[0].Comment, "\n")
	}
	n, err := node(fields)
	if err != nil {
		return nil, fmt.Errorf("yamlout: %w", err)
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, fmt.Errorf("yamlout: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("yamlout: %w", err)
	}
	return b.Bytes(), nil
}
