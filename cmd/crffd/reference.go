package main

import (
	"fmt"
	"sort"
	"strings"
)

// configReference renders settings as the Markdown table of the
// configuration reference in docs/configuration.md, so that the
// documentation is generated from the code and a test can tell when the two
// drift apart.
func configReference() string {
	var b strings.Builder
	b.WriteString("| key | default | environment | meaning |\n|---|---|---|---|\n")
	for _, s := range settings {
		env := "`" + envName(s.Key) + "`"
		if isMap(s.Default) {
			env = "`" + envName(s.Key) + "_<KEY>` (KEY upper-cased, `-` as `_`)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", s.Key, formatDefault(s.Default), env, s.Usage)
	}
	return b.String()
}

func formatDefault(v any) string {
	switch d := v.(type) {
	case string:
		if d == "" {
			return "(empty)"
		}
		return "`" + d + "`"
	case map[string]string:
		if len(d) == 0 {
			return "(none)"
		}
		keys := make([]string, 0, len(d))
		for k := range d {
			keys = append(keys, k+": "+d[k])
		}
		sort.Strings(keys)
		return "`" + strings.Join(keys, ", ") + "`"
	case []string:
		if len(d) == 0 {
			return "(none)"
		}
		return "`" + strings.Join(d, ", ") + "`"
	case map[string]float64:
		if len(d) == 0 {
			return "(none)"
		}
		return fmt.Sprintf("`%v`", d)
	default:
		return fmt.Sprintf("`%v`", d)
	}
}
