package selection

import (
	"fmt"
	"math"
	"slices"

	"github.com/crffd/crffd/estimator"
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
		e.Sites[s].Best, e.Sites[s].Diff, e.Sites[s].DiffSE = ch.Best, ch.Diff, ch.DiffSE
		if slices.Equal(ch.Members, e.Members) {
			continue
		}
		own, _, err := Recentre(centres, ch.Members)
		if err != nil {
			return Ensemble{}, err
		}
		e.Sites[s].Gap, e.Sites[s].GapSE, e.Sites[s].Shift = own[s].Gap, own[s].GapSE, own[s].Shift
		e.Sites[s].Members = ch.Members
	}
	return e, nil
}

// SiteScores are how a site's own choice came about (CombineBySite): its
// best candidate, and each candidate's paired loss difference from it,
// pooled across sites by random effects (Diff, DiffSE: what chose the
// members) and of the site's own held-out rows alone (Own, OwnSE: what
// the pooling shrank; nil for a site that held no rows out). The gap
// between the two is the shrinkage.
type SiteScores struct {
	Best         int
	Diff, DiffSE []float64
	Own, OwnSE   []float64
}

// OwnDiffs returns each candidate's mean paired loss difference from
// candidate ref over the held-out rows of the Pairs p alone, and its
// standard error (with the noise of a private site's sums).
func OwnDiffs(p Pairs, ref int) (diff, se []float64, err error) {
	sums, err := p.Sums(ref)
	if err != nil {
		return nil, nil, err
	}
	diff, se = make([]float64, len(sums)), make([]float64, len(sums))
	for a, d := range sums {
		if a == ref || d.N == 0 {
			continue
		}
		diff[a], se[a] = d.Diff/d.N, noisySE(meanSE(d.Diff, d.DiffSq, d.N), d.DiffNoise, d.N)
	}
	return diff, se, nil
}

// Scores returns the SiteScores of site c under e, whose own validation
// Pairs are own (nil: none held out), or nil when e was not chosen per
// site.
func (e Ensemble) Scores(site int, own *Pairs) (*SiteScores, error) {
	if site < 0 || site >= len(e.Sites) || e.Sites[site].Diff == nil {
		return nil, nil
	}
	c := e.Sites[site]
	out := &SiteScores{Best: c.Best, Diff: c.Diff, DiffSE: c.DiffSE}
	if own != nil && own.N >= 2 {
		var err error
		if out.Own, out.OwnSE, err = OwnDiffs(*own, c.Best); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SiteMembers returns the members of site's ensemble: its own choice
// (CombineBySite), or the federation's.
func (e Ensemble) SiteMembers(site int) []int {
	if site >= 0 && site < len(e.Sites) && e.Sites[site].Members != nil {
		return e.Sites[site].Members
	}
	return e.Members
}

// Site-local candidates. A site unlike the others is served worst by the
// pooled T- and DR-learners, which fit the majority's effect surface. With
// a choice per site, each site also scores a T-learner and a DR-learner
// solved from its own training rows' Stats alone, on the same outcome
// features. Their regressions never leave the site: the coordinator lists
// the candidates without them, and each site fills in its own (Localise),
// so what travels is still the loss sums.
const (
	KindSiteTLearner = "site-tlearner" // the T-learner of the site's own rows
	KindSiteDR       = "site-dr"       // the DR-learner of the site's own rows
)

// Local reports whether kind is a site-local candidate's, whose
// regressions each site solves from its own Stats.
func Local(kind string) bool { return kind == KindSiteTLearner || kind == KindSiteDR }

// ridgeKind returns the pooled ridge kind that a site-local kind fits as,
// and any other kind as it is.
func ridgeKind(kind string) string {
	switch kind {
	case KindSiteTLearner:
		return KindTLearner
	case KindSiteDR:
		return KindDR
	}
	return kind
}

// LocalCandidates returns the site-local candidates of kinds (Wants),
// penalty by penalty, and their Estimators without regressions
// (Localise fills them in at each site). Their Kernel is 0.
func LocalCandidates(penalties []float64, kinds []string) ([]Candidate, []Estimator) {
	var cands []Candidate
	var ests []Estimator
	for _, lambda := range penalties {
		for _, kind := range []string{KindSiteTLearner, KindSiteDR} {
			if Wants(kinds, kind) {
				cands = append(cands, Candidate{Name: CandidateName(kind, "", lambda), Kind: kind, Ridge: lambda})
				ests = append(ests, Estimator{Kind: kind, Ridge: lambda})
			}
		}
	}
	return cands, ests
}

// LocalStatsWanted reports whether candidates of kinds chosen per site
// (bySite) include site-local ones, and whether those need the DR-learner's
// statistics.
func LocalStatsWanted(kinds []string, bySite bool) (local, dr bool) {
	if !bySite {
		return false, false
	}
	t, d := Wants(kinds, KindSiteTLearner), Wants(kinds, KindSiteDR)
	return t || d, d
}

// Localise returns e as site uses it: a site-local candidate solved from
// own, the site's own exact Stats; an ensemble with its site-local members
// solved; any other estimator as it is. own may be empty when e has no
// site-local part.
func (e Estimator) Localise(own Stats) (Estimator, error) {
	switch {
	case e.Kind == KindEnsemble:
		members := make([]Member, len(e.Members))
		for j, m := range e.Members {
			var err error
			if m.Estimator, err = m.Estimator.Localise(own); err != nil {
				return Estimator{}, err
			}
			members[j] = m
		}
		e.Members = members
		return e, nil
	case !Local(e.Kind):
		return e, nil
	}
	if own.Arms[0] == nil || (e.Kind == KindSiteDR && own.DR == nil) {
		return Estimator{}, fmt.Errorf("%w: a %s candidate without the site's statistics", ErrInput, e.Kind)
	}
	if own.Noise != [3]float64{} {
		// A private site's statistics are released noised; its exact
		// ones would make the losses it releases depend on every
		// training row. The coordinator offers no site-local candidate
		// to a run with private sites.
		return Estimator{}, fmt.Errorf("%w: a %s candidate at a site whose statistics are noised", ErrInput, e.Kind)
	}
	if e.Kind == KindSiteDR {
		dr, err := own.DR.Solve(e.Ridge)
		if err != nil {
			return Estimator{}, fmt.Errorf("%s/%g: %w", e.Kind, e.Ridge, err)
		}
		e.DR = &dr
		return e, nil
	}
	var arms [2]estimator.Ridge
	for a := range 2 {
		var err error
		if arms[a], err = own.Arms[a].Solve(e.Ridge); err != nil {
			return Estimator{}, fmt.Errorf("%s/%g, treatment %d: %w", e.Kind, e.Ridge, a, err)
		}
	}
	e.Arms = &arms
	return e, nil
}

// Localised returns ests, each Localised to the site of own.
func Localised(ests []Estimator, own Stats) ([]Estimator, error) {
	out := make([]Estimator, len(ests))
	for c, e := range ests {
		var err error
		if out[c], err = e.Localise(own); err != nil {
			return nil, err
		}
	}
	return out, nil
}
