package main

import (
	"strings"
	"testing"
)

func TestPositivityNote(t *testing.T) {
	for _, tc := range []struct {
		name string
		site demoSite
		want string // a substring of the note; "" for no note
	}{
		{"balanced", demoSite{name: "site1", treated: 140, control: 160}, ""},
		{"few controls", demoSite{name: "site3", treated: 291, control: 9},
			"positivity: site3 has 9 control rows of 300 and 0 with a propensity outside [0.01, 0.99]"},
		{"few treated", demoSite{name: "site2", treated: 4, control: 296}, "site2 has 4 treated rows of 300"},
		{"at the bound", demoSite{name: "site1", treated: 285, control: 15}, ""},
		{"extreme propensities", demoSite{name: "site1", treated: 150, control: 150, extreme: 2},
			"site1 has 150 control rows of 300 and 2 with a propensity outside"},
		{"nothing scored", demoSite{name: "site1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := positivityNote(tc.site)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("positivityNote = %q, want %q", got, tc.want)
			}
		})
	}
}
