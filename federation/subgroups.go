package federation

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/inference"
)

// Federated subgroups. The coordinator names subgroups by a name and a
// SQL predicate over the sites' tables (CoordinatorConfig.Subgroups) and
// sends them with the final weights. Each site decides by its own policy
// (SiteConfig.Subgroups) which to evaluate on its own table
// (SiteConfig.SubgroupRows), and answers, with its local ATE, the count,
// Σψ and Σψ² of each arm of each group and the group's Σ CATE, or nothing
// for a group it does not evaluate, whose smaller arm has fewer than
// min_arm_rows rows, or whose complement (the site's rows outside it) has
// an arm of 1 to min_arm_rows − 1 rows: the site's ATE sums minus the
// group's are the complement's, so a group of every row but one would
// give that row away. The coordinator pools each group's sums over the
// sites that sent them, with the stratified variance
// (inference.Stratified), and sends a site the global effect only when at
// least two other sites sent sums of it: with one, the site could
// subtract its own sums and single out that peer's.
//
// Two predicates that differ by one row reveal that row's ψ from their
// sums' difference, which no cell size prevents: a site that allows any
// predicate (SubgroupPolicy.Any) trusts the coordinator with that. A site
// that names the groups it evaluates (SubgroupPolicy.Names) evaluates
// each only with the predicate it approved under that name
// (SubgroupPolicy.Approved, the site's own crff_subgroup), and refuses a
// coordinator's predicate that differs from it. A site whose aggregates
// are differentially private evaluates none: there is no mechanism for
// them yet.

// Subgroup is a federated subgroup: its name and its SQL predicate.
type Subgroup struct {
	Name      string `mapstructure:"name" json:"name"`
	Predicate string `mapstructure:"predicate" json:"predicate"`
}

// Limits of federated subgroups.
const (
	MaxSubgroups      = 64   // per run
	MaxSubgroupBytes  = 4096 // a predicate's bytes, subgroup.Check's bound too
	maxSubgroupName   = 128  // a name's bytes
	gateSumsLen       = 7    // n0, Σψ0, Σψ²0, n1, Σψ1, Σψ²1, Σ CATE
	gateGlobalLen     = 8    // n, treated, control, estimate, se, lower, upper, plug-in
	tSubgroupCount    = "subgroups.count"
	pSubgroup         = "subgroup." // subgroup.<i>.name, subgroup.<i>.predicate: UTF-8 bytes
	pGate             = "gate."     // gate.<i>.sums (site), gate.<i>.global and gate.<i>.sites (coordinator)
	errSubgroupPrefix = "subgroups"
)

// SubgroupPolicy is a site's policy on federated subgroups: none (the
// zero value), any the coordinator sends (Any), or those named (Names),
// each with the predicate Approved returns for its name.
type SubgroupPolicy struct {
	Any   bool
	Names []string
	// Approved returns the predicate the site approved under a name, and
	// false when it approved none; nil approves none.
	Approved func(ctx context.Context, name string) (predicate string, ok bool, err error)
}

func (p SubgroupPolicy) allows(name string) bool { return p.Any || slices.Contains(p.Names, name) }

// approves returns why the named policy p refuses g's predicate, or "".
func (p SubgroupPolicy) approves(ctx context.Context, g Subgroup) (string, error) {
	if p.Approved == nil {
		return "the site approved no predicate under its name (crff_subgroup)", nil
	}
	pred, ok, err := p.Approved(ctx, g.Name)
	switch {
	case err != nil:
		return "", fmt.Errorf("subgroup %q: the site's approved predicate: %w", g.Name, err)
	case !ok:
		return "the site approved no predicate under its name (crff_subgroup)", nil
	case strings.TrimSpace(pred) != strings.TrimSpace(g.Predicate):
		return "the coordinator's predicate differs from the one the site approved under its name (crff_subgroup)", nil
	}
	return "", nil
}

// CheckSubgroups returns an error unless gs are at most MaxSubgroups
// subgroups of distinct, non-empty names of at most 128 bytes, with
// predicates of 1 to MaxSubgroupBytes bytes of UTF-8.
func CheckSubgroups(gs []Subgroup) error {
	if len(gs) > MaxSubgroups {
		return fmt.Errorf("%s: %d subgroups, at most %d", errSubgroupPrefix, len(gs), MaxSubgroups)
	}
	seen := map[string]bool{}
	for i, g := range gs {
		switch {
		case g.Name == "" || len(g.Name) > maxSubgroupName || !utf8.ValidString(g.Name):
			return fmt.Errorf("%s: subgroup %d: a name of 1 to %d bytes of UTF-8, not %q", errSubgroupPrefix, i+1, maxSubgroupName, g.Name)
		case seen[g.Name]:
			return fmt.Errorf("%s: subgroup %q is named twice", errSubgroupPrefix, g.Name)
		case g.Predicate == "" || len(g.Predicate) > MaxSubgroupBytes || !utf8.ValidString(g.Predicate):
			return fmt.Errorf("%s: subgroup %q: a predicate of 1 to %d bytes of UTF-8", errSubgroupPrefix, g.Name, MaxSubgroupBytes)
		}
		seen[g.Name] = true
	}
	return nil
}

// GateSums are a site's sums of one subgroup's rows: per arm (control,
// treated) the count, Σψ and Σψ², and Σ CATE over both.
type GateSums [gateSumsLen]float64

func (g GateSums) sums() inference.Sums {
	return inference.Sums{N: int(g[0] + g[3]), Sum: g[1] + g[4], SumSq: g[2] + g[5]}
}

// GlobalGATE is a subgroup's effect over the sites that evaluated it.
type GlobalGATE struct {
	Name             string
	N                int
	Treated, Control int
	Estimate         inference.Estimate
	PlugIn           float64 // the mean CATE
	Sites            []int   // the sites whose rows it covers, by index
	// Withheld says that the coordinator pooled the subgroup but did not
	// send its figures to this site, which fewer than two other sites'
	// sums would let single out a peer's; the other fields are zero.
	Withheld bool
}

func bytesTensor(name, s string) wire.Tensor {
	v := make([]float64, len(s))
	for i := range len(s) {
		v[i] = float64(s[i])
	}
	return wire.Vector(name, v)
}

func decodeBytes(e *wire.Envelope, name string, most int) (string, error) {
	v, err := vector(e, name, -1)
	if err != nil {
		return "", err
	}
	if len(v) > most {
		return "", fmt.Errorf("%w: %s of %d bytes, at most %d", ErrProtocol, name, len(v), most)
	}
	b := make([]byte, len(v))
	for i, x := range v {
		if x != math.Trunc(x) || x < 0 || x > 255 {
			return "", fmt.Errorf("%w: %s: byte %v", ErrProtocol, name, x)
		}
		b[i] = byte(x)
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("%w: %s is not UTF-8", ErrProtocol, name)
	}
	return string(b), nil
}

// subgroupTensors are what the final weights carry of gs.
func subgroupTensors(gs []Subgroup) []wire.Tensor {
	if len(gs) == 0 {
		return nil
	}
	ts := []wire.Tensor{wire.Scalar(tSubgroupCount, float64(len(gs)))}
	for i, g := range gs {
		p := fmt.Sprintf("%s%d.", pSubgroup, i)
		ts = append(ts, bytesTensor(p+"name", g.Name), bytesTensor(p+"predicate", g.Predicate))
	}
	return ts
}

// decodeSubgroups reads the subgroups of final weights, none when absent;
// more than MaxSubgroups are refused before anything is allocated.
func decodeSubgroups(e *wire.Envelope) ([]Subgroup, error) {
	if _, ok := e.Tensor(tSubgroupCount); !ok {
		return nil, nil
	}
	n, err := integer(e, tSubgroupCount)
	if err != nil {
		return nil, err
	}
	if n > MaxSubgroups {
		return nil, overLimit("subgroup count", n, MaxSubgroups, "subgroups")
	}
	gs := make([]Subgroup, n)
	for i := range gs {
		p := fmt.Sprintf("%s%d.", pSubgroup, i)
		if gs[i].Name, err = decodeBytes(e, p+"name", maxSubgroupName); err != nil {
			return nil, err
		}
		if gs[i].Predicate, err = decodeBytes(e, p+"predicate", MaxSubgroupBytes); err != nil {
			return nil, err
		}
	}
	if err := CheckSubgroups(gs); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	return gs, nil
}

// gateTensors answers the subgroups gs of the final weights: the sums of
// each group the site evaluates over its kept rows, whose AIPW scores are
// psi, arms w and CATEs cate. It logs each group's fate by name, never a
// value.
func (s *site) gateTensors(ctx context.Context, gs []Subgroup, psi, w, cate []float64) ([]wire.Tensor, error) {
	s.res.Subgroups = gs
	if len(gs) == 0 {
		return nil, nil
	}
	skip := func(g Subgroup, why string) {
		s.log.Info("subgroup not evaluated", slog.String(LogKeySubgroup, g.Name), slog.String(LogKeyReason, why))
	}
	var ts []wire.Tensor
	for i, g := range gs {
		switch {
		case s.cfg.Privacy != nil:
			skip(g, "the site's aggregates are differentially private, and subgroup sums have no mechanism yet")
			continue
		case !s.cfg.Subgroups.allows(g.Name):
			skip(g, "the site's policy (site.subgroups) does not allow it")
			continue
		case s.cfg.SubgroupRows == nil:
			skip(g, "the site cannot evaluate predicates")
			continue
		}
		if !s.cfg.Subgroups.Any {
			why, err := s.cfg.Subgroups.approves(ctx, g)
			if err != nil {
				return nil, err
			}
			if why != "" {
				skip(g, why)
				continue
			}
		}
		in, err := s.cfg.SubgroupRows(ctx, g.Predicate)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			skip(g, err.Error())
			continue
		}
		if len(in) != s.cfg.Data.Rows() {
			return nil, fmt.Errorf("subgroup %q: membership of %d rows, the site has %d", g.Name, len(in), s.cfg.Data.Rows())
		}
		var sums GateSums
		var outside [2]int // the complement's rows by arm
		for j, k := range s.res.Kept {
			if math.IsNaN(psi[j]) {
				continue
			}
			if !in[k] {
				outside[int(w[j])]++
				continue
			}
			a := 0
			if w[j] == 1 {
				a = 3
			}
			sums[a]++
			sums[a+1] += psi[j]
			sums[a+2] += psi[j] * psi[j]
			sums[6] += cate[j]
		}
		small := func(n int) bool { return n > 0 && n < s.cfg.minArmRows() }
		switch {
		case min(sums[0], sums[3]) < float64(s.cfg.minArmRows()):
			skip(g, fmt.Sprintf("fewer than %d rows in an arm (federation.min_arm_rows)", s.cfg.minArmRows()))
			continue
		case small(outside[0]) || small(outside[1]):
			skip(g, fmt.Sprintf("its complement has 1 to %d rows in an arm (federation.min_arm_rows), which the site's ATE sums minus the group's would give away", s.cfg.minArmRows()-1))
			continue
		}
		ts = append(ts, wire.Vector(fmt.Sprintf("%s%d.sums", pGate, i), sums[:]))
		s.log.Info("subgroup evaluated", slog.String(LogKeySubgroup, g.Name))
	}
	return ts, nil
}

// decodeGateSums reads a site's subgroup sums of the n subgroups asked,
// nil for those it did not send; rows bounds its row count.
func decodeGateSums(e *wire.Envelope, n, rows int) ([]*GateSums, error) {
	if n == 0 {
		return nil, nil
	}
	out := make([]*GateSums, n)
	for i := range out {
		name := fmt.Sprintf("%s%d.sums", pGate, i)
		if _, ok := e.Tensor(name); !ok {
			continue
		}
		v, err := vector(e, name, gateSumsLen)
		if err != nil {
			return nil, err
		}
		var g GateSums
		copy(g[:], v)
		for j, x := range g {
			if math.IsNaN(x) || math.IsInf(x, 0) || ((j == 0 || j == 3) && (x != math.Trunc(x) || x < 0)) || ((j == 2 || j == 5) && x < 0) {
				return nil, fmt.Errorf("%w: %s: entry %d is %v", ErrProtocol, name, j, x)
			}
		}
		if g[0]+g[3] > float64(rows) {
			return nil, fmt.Errorf("%w: %s over %v rows, more than the site's %d", ErrProtocol, name, g[0]+g[3], rows)
		}
		for _, a := range []int{0, 3} {
			// As for the ATE (decodeLocal): an empty arm has no sums, and
			// Σψ² ≥ (Σψ)²/n, lest the pooled standard error be too small.
			n, sum, sq := g[a], g[a+1], g[a+2]
			if n == 0 && (sum != 0 || sq != 0) || n > 0 && sq < sum*sum/n*(1-1e-9) {
				return nil, fmt.Errorf("%w: %s: arm of %v rows with Σψ %v and Σψ² %v, which no scores have", ErrProtocol, name, n, sum, sq)
			}
		}
		out[i] = &g
	}
	return out, nil
}

// globalGATEs pools each subgroup's sums over the sites that sent them
// (sums[s][i] of site s and subgroup i): the stratified AIPW estimate
// over their rows. A subgroup no site sent, or too few rows for an
// interval, has none.
func globalGATEs(gs []Subgroup, sums [][]*GateSums) []*GlobalGATE {
	out := make([]*GlobalGATE, len(gs))
	for i, g := range gs {
		var strata []inference.Sums
		gl := &GlobalGATE{Name: g.Name}
		var cate float64
		for s := range sums {
			if i >= len(sums[s]) || sums[s][i] == nil {
				continue
			}
			x := *sums[s][i]
			strata = append(strata, x.sums())
			gl.Control += int(x[0])
			gl.Treated += int(x[3])
			cate += x[6]
			gl.Sites = append(gl.Sites, s)
		}
		if len(strata) == 0 {
			continue
		}
		e, err := inference.Stratified(strata)
		if err != nil {
			continue
		}
		gl.Estimate, gl.N, gl.PlugIn = e, e.N, cate/float64(e.N)
		if !allFinite(e.Estimate, e.SE, e.Lower, e.Upper, gl.PlugIn) {
			// Finite sums whose pooled figures overflow: the envelope
			// could not carry them, and the run need not fail for them.
			continue
		}
		out[i] = gl
	}
	return out
}

// globalGateTensors are what the global-ATE envelope to site carries of
// gates: a gate at least two other sites sent sums of, and a mark for
// one withheld.
func globalGateTensors(gates []*GlobalGATE, site int) []wire.Tensor {
	var ts []wire.Tensor
	for i, g := range gates {
		if g == nil {
			continue
		}
		others := len(g.Sites)
		if slices.Contains(g.Sites, site) {
			others--
		}
		if others < 2 {
			ts = append(ts, wire.Scalar(fmt.Sprintf("%s%d.withheld", pGate, i), 1))
			continue
		}
		e := g.Estimate
		sites := make([]float64, len(g.Sites))
		for j, s := range g.Sites {
			sites[j] = float64(s)
		}
		p := fmt.Sprintf("%s%d.", pGate, i)
		ts = append(ts, wire.Vector(p+"global", []float64{float64(g.N), float64(g.Treated), float64(g.Control), e.Estimate, e.SE, e.Lower, e.Upper, g.PlugIn}),
			wire.Vector(p+"sites", sites))
	}
	return ts
}

// decodeGlobalGATEs reads the global effects of the subgroups gs the site
// was asked, nil for those it has none of, naming the sites of m.
func decodeGlobalGATEs(e *wire.Envelope, gs []Subgroup, m int) ([]*GlobalGATE, error) {
	out := make([]*GlobalGATE, len(gs))
	for i, g := range gs {
		p := fmt.Sprintf("%s%d.", pGate, i)
		if _, ok := e.Tensor(p + "withheld"); ok {
			out[i] = &GlobalGATE{Name: g.Name, Withheld: true}
			continue
		}
		if _, ok := e.Tensor(p + "global"); !ok {
			continue
		}
		v, err := vector(e, p+"global", gateGlobalLen)
		if err != nil {
			return nil, err
		}
		sites, err := vector(e, p+"sites", -1)
		if err != nil {
			return nil, err
		}
		if len(sites) == 0 || len(sites) > m {
			return nil, fmt.Errorf("%w: subgroup %q over %d sites of %d", ErrProtocol, g.Name, len(sites), m)
		}
		gl := &GlobalGATE{Name: g.Name}
		for _, x := range sites {
			if x != math.Trunc(x) || x < 0 || x >= float64(m) || slices.Contains(gl.Sites, int(x)) {
				return nil, fmt.Errorf("%w: subgroup %q: site %v of %d", ErrProtocol, g.Name, x, m)
			}
			gl.Sites = append(gl.Sites, int(x))
		}
		for j, x := range v {
			if math.IsNaN(x) || math.IsInf(x, 0) || (j < 3 && (x != math.Trunc(x) || x < 0 || x > 1<<52)) || (j == 4 && x < 0) {
				return nil, fmt.Errorf("%w: subgroup %q: entry %d is %v", ErrProtocol, g.Name, j, x)
			}
		}
		if v[0] != v[1]+v[2] || !(v[5] <= v[3] && v[3] <= v[6]) {
			return nil, fmt.Errorf("%w: subgroup %q: %v rows of %v treated and %v control, estimate %v in [%v, %v]", ErrProtocol, g.Name, v[0], v[1], v[2], v[3], v[5], v[6])
		}
		gl.N, gl.Treated, gl.Control = int(v[0]), int(v[1]), int(v[2])
		gl.Estimate = inference.Estimate{Estimate: v[3], SE: v[4], Lower: v[5], Upper: v[6], N: gl.N}
		gl.PlugIn = v[7]
		out[i] = gl
	}
	return out, nil
}

func allFinite(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

func subgroupNames(gs []Subgroup) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.Name
	}
	return out
}
