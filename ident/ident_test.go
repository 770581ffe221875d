package ident_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/crffd/crffd/ident"
)

func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{
		"site-a": true, "coordinator": true, "h1.example_2": true, "0site": true,
		"": false, "Site": false, ".hidden": false, "-x": false, "a/b": false, "..": false, "a b": false,
		strings.Repeat("a", ident.MaxNameBytes): true, strings.Repeat("a", ident.MaxNameBytes+1): false,
	} {
		if err := ident.CheckName(name); (err == nil) != ok || (err != nil && !errors.Is(err, ident.ErrName)) {
			t.Errorf("CheckName(%q) = %v, want ok=%v", name, err, ok)
		}
		if err := ident.CheckModel(name); (err == nil) != ok {
			t.Errorf("CheckModel(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

func TestCheckRunID(t *testing.T) {
	for id, ok := range map[string]bool{
		"run-1": true, "2026-11-27T15:36:34Z": true, "0A": true,
		"": false, ":a": false, "a b": false, "a/b": false,
		strings.Repeat("a", ident.MaxRunIDBytes): true, strings.Repeat("a", ident.MaxRunIDBytes+1): false,
	} {
		if err := ident.CheckRunID(id); (err == nil) != ok || (err != nil && !errors.Is(err, ident.ErrName)) {
			t.Errorf("CheckRunID(%q) = %v, want ok=%v", id, err, ok)
		}
	}
}
