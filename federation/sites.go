package federation

import (
	"errors"
	"slices"
)

// SitesError is the error of a run that ended because of some of its
// sites, and of no fault of the others: they refused the run, the
// coordinator refused them (schema, kernel, protocol), or they fell silent.
// A coordinator daemon with coordinator.min_sites runs again at once
// without them (Without) while enough sites remain.
type SitesError struct {
	Sites []string // the sites at fault, in coordinator.sites order
	Err   error
}

func (e *SitesError) Error() string { return e.Err.Error() }

// Unwrap returns the error that ended the run.
func (e *SitesError) Unwrap() error { return e.Err }

// FaultySites returns the sites err blames (SitesError), or nil when err
// is not the fault of particular sites.
func FaultySites(err error) []string {
	var se *SitesError
	if errors.As(err, &se) {
		return se.Sites
	}
	return nil
}

// Without returns sites without the names in drop, in their order.
func Without(sites, drop []string) []string {
	var out []string
	for _, s := range sites {
		if !slices.Contains(drop, s) {
			out = append(out, s)
		}
	}
	return out
}

// Subsequence reports whether sub is sites with some names left out, in
// the same order: the sites of a run that went on without some of them.
func Subsequence(sub, sites []string) bool {
	i := 0
	for _, s := range sites {
		if i < len(sub) && sub[i] == s {
			i++
		}
	}
	return i == len(sub)
}
