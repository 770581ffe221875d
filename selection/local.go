package selection

import (
	"fmt"
	"math"
	"slices"
)

// A choice per site. The federation's ensemble (Combine) is chosen on the
// validation rows of every site together, so that where most sites are
// alike they decide for a site that is not. BySite chooses each site's
// members on its own rows instead, with its paired loss differences
// pooled across sites by random effects (randomEffects), as Recentre
// pools the sites' gaps: a site whose differences agree with the others'
// borrows their evidence, which a small site needs, and a site whose
// differences depart from them by more than their noise follows its own.

// SiteChoice is one site's ensemble, chosen on its own validation rows
// with the other sites' evidence pooled in.
type SiteChoice struct {
	Members []int // candidate indices, increasing
	Best    int   // the candidate of least pooled loss at the site
	// Diff and DiffSE are, per candidate, the site's pooled mean paired
	// loss difference from Best and its standard error (0 for Best).
	Diff, DiffSE []float64
}

// BySite returns each site's choice from the sites' validation Pairs
// (sites[s] of site s; a site with fewer than 2 validation rows takes the
// pooled evidence alone): its best candidate is the one of least pooled
// loss difference from the federation's best, and its members those
// whose pooled difference from its best is at most z of their standard
// errors.
func BySite(sites []Pairs, z float64) ([]SiteChoice, error) {
	if len(sites) == 0 {
		return nil, fmt.Errorf("%w: no site's pair sums", ErrInput)
	}
	if z < 0 || math.IsNaN(z) {
		return nil, fmt.Errorf("%w: z %v", ErrInput, z)
	}
	var pooled Pairs
	for s, p := range sites {
		if err := pooled.Add(p); err != nil {
			return nil, fmt.Errorf("site %d: %w", s, err)
		}
	}
	c := pooled.C
	if c == 0 {
		return nil, fmt.Errorf("%w: pair sums of no candidate", ErrInput)
	}
	if pooled.N < 2 {
		return nil, fmt.Errorf("%w: %v validation rows, need at least 2", ErrInput, pooled.N)
	}
	ref := 0
	for a := range c {
		if pooled.Res[a*c+a] < pooled.Res[ref*c+ref] {
			ref = a
		}
	}
	fromRef, err := pooledDiffs(sites, ref)
	if err != nil {
		return nil, err
	}
	out := make([]SiteChoice, len(sites))
	for s := range sites {
		best := ref
		for a := range c {
			if fromRef[a].est[s] < fromRef[best].est[s] {
				best = a
			}
		}
		d := fromRef
		if best != ref {
			if d, err = pooledDiffs(sites, best); err != nil {
				return nil, err
			}
		}
		ch := SiteChoice{Best: best, Diff: make([]float64, c), DiffSE: make([]float64, c)}
		for a := range c {
			ch.Diff[a], ch.DiffSE[a] = d[a].est[s], math.Sqrt(d[a].variance[s])
			if a == best || ch.Diff[a] <= z*ch.DiffSE[a] {
				ch.Members = append(ch.Members, a)
			}
		}
		out[s] = ch
	}
	return out, nil
}

// pooled is one candidate's paired difference from a reference at every
// site, pooled across sites.
type pooled struct{ est, variance []float64 }

// pooledDiffs returns, per candidate, every site's pooled mean paired loss
// difference from candidate ref (0, of variance 0, for ref itself and for
// a candidate no site tells from it).
func pooledDiffs(sites []Pairs, ref int) ([]pooled, error) {
	c := sites[0].C
	out := make([]pooled, c)
	g, v := make([]float64, len(sites)), make([]float64, len(sites))
	for a := range c {
		clear(g)
		clear(v)
		if a != ref {
			for s, p := range sites {
				if p.N < 2 {
					continue
				}
				sums, err := p.Sums(ref)
				if err != nil {
					return nil, fmt.Errorf("site %d: %w", s, err)
				}
				d := sums[a]
				se := noisySE(meanSE(d.Diff, d.DiffSq, d.N), d.DiffNoise, d.N)
				g[s], v[s] = d.Diff/d.N, se*se
			}
		}
		est, variance, _, ok := randomEffects(g, v)
		if !ok {
			est, variance = make([]float64, len(sites)), make([]float64, len(sites))
		}
		out[a] = pooled{est: est, variance: variance}
	}
	return out, nil
}

// CombineBySite takes the federation's Ensemble e (Combine's, of the
// sites' summed Pairs and the Centres centres) and gives each site the
// members of its own choice (BySite, on the sites' own Pairs) and the
// shift that re-centres their mean at the site (Recentre with those
// members). Ensemble.Members stay the federation's, for the record.
func CombineBySite(e Ensemble, sites []Pairs, centres []Centre, z float64) (Ensemble, error) {
	if len(centres) != len(sites) || len(e.Sites) != len(sites) {
		return Ensemble{}, fmt.Errorf("%w: %d sites' pair sums, %d centring sums and an ensemble of %d sites", ErrInput, len(sites), len(centres), len(e.Sites))
	}
	e.Sites = slices.Clone(e.Sites)
	choices, err := BySite(sites, z)
	if err != nil {
		return Ensemble{}, err
	}
	for s, ch := range choices {
		if slices.Equal(ch.Members, e.Members) {
			continue
		}
		own, _, err := Recentre(centres, ch.Members)
		if err != nil {
			return Ensemble{}, err
		}
		e.Sites[s] = own[s]
		e.Sites[s].Members = ch.Members
	}
	return e, nil
}

// SiteMembers returns the members of site's ensemble: its own choice
// (CombineBySite), or the federation's.
func (e Ensemble) SiteMembers(site int) []int {
	if site >= 0 && site < len(e.Sites) && e.Sites[site].Members != nil {
		return e.Sites[site].Members
	}
	return e.Members
}
