package federation

import (
	"fmt"
	"log/slog"
	"math"

	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/heterogeneity"
	"github.com/crffd/crffd/inference"
)

// The global tests of heterogeneity (package heterogeneity) that a
// federation computes from sums: the BLP of ψ on [1, τ̂ − τ̄], the value
// of the rule "treat where the calibrated CATE's lower bound is above 0",
// and GATES, the RATE and the TOC of buckets of rows ranked as ties
// (heterogeneity.NewBuckets), over every site's rows held out of the
// CATE's training. A site sends its sums in its ate envelope, and the
// coordinator returns the pooled statistics in global-ate, when every
// site sent them: a statistic over some sites only would be none of the
// named ones. A bucket holds at least 2·MinArmRows rows, in bins of τ̂
// a 32nd of the pooled outcome's standard deviation wide, so that no
// cut point of τ̂ is one row's value; CLAN, means of covariates, stays
// local.
const (
	tHetBLP          = "het.blp"           // a site's heterogeneity.BLPSums: N, Shift, D[0..4], PD[0..3], P2D[0..2]
	tHetPolicy       = "het.policy"        // a site's heterogeneity.PolicySums: Treated, then N, Σ, Σ² of Value, GainNone, GainAll
	tHetGlobalBLP    = "het.global.blp"    // N, then estimate and se of β1 and β2, then β2's p-value
	tHetGlobalPolicy = "het.global.policy" // N, Share, then estimate and se of Value, GainNone, GainAll
	tHetBuckets      = "het.buckets"       // a site's heterogeneity.Buckets: Key, N, Σψ, Σψ² of each
	tHetGlobalRanked = "het.global.ranked" // N, estimate and se of each fifth's GATES, the top minus the bottom, AUTOC, Qini and TOC at 10%, …, 90%
	bucketBinsPerSD  = 32                  // the bins of τ̂ per pooled outcome standard deviation
	blpSumsLen       = 14
	policySumsLen    = 10
)

// HetSums are a site's sums of heterogeneity over its held-out rows (nil:
// not sent).
type HetSums struct {
	BLP     *heterogeneity.BLPSums    `json:",omitempty"`
	Policy  *heterogeneity.PolicySums `json:",omitempty"`
	Buckets []heterogeneity.Bucket    `json:",omitempty"`
}

// GlobalHeterogeneity are a run's pooled tests of heterogeneity: each nil
// when some site did not send its sums.
type GlobalHeterogeneity struct {
	BLP    *heterogeneity.BLP
	Policy *heterogeneity.Policy
	Ranked *heterogeneity.Ranked
}

// hetTensors are the sums of heterogeneity of the site's held-out rows,
// whose scores are psi and control-arm scores gamma0, and whose CATEs
// before calibration are cate, all by kept row: none at a private site
// (no mechanism noises them yet) or one that held fewer than
// 2·min_arm_rows out (none at all, or a holdout thinned). The rule's
// sums go only when the rows it treats, and those it does not, are none
// or at least twice federation.min_arm_rows, as many as the site holds
// out at the least: with the BLP's Σψ, the one would give the other away.
func (s *site) hetTensors(psi, gamma0, cate []float64) ([]wire.Tensor, error) {
	least := 2 * s.cfg.minArmRows()
	if s.cfg.Privacy != nil || len(s.res.Held) < least {
		return nil, nil
	}
	h, err := heterogeneity.PickHeld(s.res.Held, psi, gamma0, cate, s.kept.X, s.res.Calibration)
	if err != nil {
		return nil, err
	}
	blp, err := h.BLPSums()
	if err != nil {
		return nil, err
	}
	ts := []wire.Tensor{wire.Vector(tHetBLP, blpVector(blp))}
	// The buckets of each of the rule's parts apart: any sum over a part
	// is then a sum of buckets, and a difference of the two isolates no
	// row. A part too small to send makes one part of all the rows.
	parts := h.LowerAbove0()
	treated := 0
	for _, t := range parts {
		if t {
			treated++
		}
	}
	n := len(parts)
	if small := func(k int) bool { return k > 0 && k < least }; small(treated) || small(n-treated) {
		s.log.Info("the policy's sums not sent", slog.String(LogKeyReason, fmt.Sprintf("it treats %d of %d held-out rows; each part needs none or at least %d (twice federation.min_arm_rows)", treated, n, least)))
		parts = nil
	} else {
		pol, err := heterogeneity.NewPolicySums(h.Control, h.PSI, parts)
		if err != nil {
			return nil, err
		}
		ts = append(ts, wire.Vector(tHetPolicy, policyVector(pol)))
	}
	b, err := heterogeneity.NewBuckets(h.PSI, h.CATE, parts, s.res.Setup.Scaler.YSD/bucketBinsPerSD, least)
	if err != nil {
		return nil, err
	}
	return append(ts, wire.Vector(tHetBuckets, bucketVector(b))), nil
}

func bucketVector(bs []heterogeneity.Bucket) []float64 {
	v := make([]float64, 0, 4*len(bs))
	for _, b := range bs {
		v = append(v, b.Key, float64(b.N), b.Sum, b.SumSq)
	}
	return v
}

func blpVector(b heterogeneity.BLPSums) []float64 {
	v := append([]float64{float64(b.N), b.Shift}, b.D[:]...)
	v = append(v, b.PD[:]...)
	return append(v, b.P2D[:]...)
}

func policyVector(p heterogeneity.PolicySums) []float64 {
	v := []float64{float64(p.Treated)}
	for _, s := range []inference.Sums{p.Value, p.GainNone, p.GainAll} {
		v = append(v, float64(s.N), s.Sum, s.SumSq)
	}
	return v
}

// decodeHetSums reads a site's sums of heterogeneity from its ate
// envelope; rows bounds its row count.
func decodeHetSums(e *wire.Envelope, rows int) (*HetSums, error) {
	var out HetSums
	count := func(name string, x float64) error {
		if x != math.Trunc(x) || x < 0 || x > float64(rows) {
			return fmt.Errorf("%w: %s counts %v rows of the site's %d", ErrProtocol, name, x, rows)
		}
		return nil
	}
	if _, ok := e.Tensor(tHetBLP); ok {
		v, err := vector(e, tHetBLP, blpSumsLen)
		if err != nil {
			return nil, err
		}
		if err := count(tHetBLP, v[0]); err != nil {
			return nil, err
		}
		b := heterogeneity.BLPSums{N: int(v[0]), Shift: v[1]}
		copy(b.D[:], v[2:7])
		copy(b.PD[:], v[7:11])
		copy(b.P2D[:], v[11:14])
		if b.D[0] != v[0] || b.D[2] < 0 || b.D[4] < 0 || b.P2D[0] < 0 || b.P2D[2] < 0 {
			return nil, fmt.Errorf("%w: %s are not sums of rows", ErrProtocol, tHetBLP)
		}
		out.BLP = &b
	}
	if _, ok := e.Tensor(tHetPolicy); ok {
		v, err := vector(e, tHetPolicy, policySumsLen)
		if err != nil {
			return nil, err
		}
		p := heterogeneity.PolicySums{}
		sums := []*inference.Sums{&p.Value, &p.GainNone, &p.GainAll}
		for i, s := range sums {
			if err := count(tHetPolicy, v[1+3*i]); err != nil {
				return nil, err
			}
			if v[3+3*i] < 0 {
				return nil, fmt.Errorf("%w: %s: a sum of squares %v", ErrProtocol, tHetPolicy, v[3+3*i])
			}
			*s = inference.Sums{N: int(v[1+3*i]), Sum: v[2+3*i], SumSq: v[3+3*i]}
		}
		if err := count(tHetPolicy, v[0]); err != nil {
			return nil, err
		}
		if p.Treated = int(v[0]); p.Treated > p.GainNone.N || p.GainAll.N != p.GainNone.N || p.Value.N != p.GainNone.N {
			return nil, fmt.Errorf("%w: %s: %d treated of %d, %d and %d rows", ErrProtocol, tHetPolicy, p.Treated, p.GainNone.N, p.GainAll.N, p.Value.N)
		}
		out.Policy = &p
	}
	if _, ok := e.Tensor(tHetBuckets); ok {
		v, err := vector(e, tHetBuckets, -1)
		if err != nil {
			return nil, err
		}
		if len(v)%4 != 0 || len(v) > 4*rows {
			return nil, fmt.Errorf("%w: %s of %d values, not 4 per bucket of at most %d", ErrProtocol, tHetBuckets, len(v), rows)
		}
		total := 0
		for j := 0; j < len(v); j += 4 {
			if err := count(tHetBuckets, v[j+1]); err != nil {
				return nil, err
			}
			b := heterogeneity.Bucket{Key: v[j], Sums: inference.Sums{N: int(v[j+1]), Sum: v[j+2], SumSq: v[j+3]}}
			if b.N < 1 || b.SumSq < 0 {
				return nil, fmt.Errorf("%w: %s: bucket %d of %d rows and Σψ² %v", ErrProtocol, tHetBuckets, j/4, b.N, b.SumSq)
			}
			total += b.N
			out.Buckets = append(out.Buckets, b)
		}
		if total > rows {
			return nil, fmt.Errorf("%w: %s over %d rows, more than the site's %d", ErrProtocol, tHetBuckets, total, rows)
		}
	}
	if out.BLP == nil && out.Policy == nil && out.Buckets == nil {
		return nil, nil
	}
	return &out, nil
}

// globalHeterogeneity pools the sites' sums into the run's global tests;
// each statistic is nil unless every site sent its sums, or when they do
// not determine it (τ̂ that does not vary, too few rows).
func globalHeterogeneity(sums []*HetSums) GlobalHeterogeneity {
	var out GlobalHeterogeneity
	var blps []heterogeneity.BLPSums
	var pol heterogeneity.PolicySums
	policies := 0
	for _, h := range sums {
		if h == nil {
			return out
		}
		if h.BLP != nil {
			blps = append(blps, *h.BLP)
		}
		if h.Policy != nil {
			pol = pol.Add(*h.Policy)
			policies++
		}
	}
	if len(blps) == len(sums) {
		if pooled, err := heterogeneity.Pool(blps); err == nil {
			if b, err := pooled.BLP(); err == nil {
				out.BLP = &b
			}
		}
	}
	if policies == len(sums) {
		if p, err := pol.Policy(); err == nil {
			out.Policy = p
		}
	}
	var buckets []heterogeneity.Bucket
	for _, h := range sums {
		if h.Buckets == nil {
			return out
		}
		buckets = append(buckets, h.Buckets...)
	}
	if r, err := heterogeneity.NewRanked(buckets); err == nil {
		out.Ranked = r
	}
	return out
}

// globalHetTensors are g as global-ate carries it.
func globalHetTensors(g GlobalHeterogeneity) []wire.Tensor {
	var ts []wire.Tensor
	if b := g.BLP; b != nil {
		ts = append(ts, wire.Vector(tHetGlobalBLP, []float64{float64(b.Het.N), b.ATE.Estimate, b.ATE.SE, b.Het.Estimate, b.Het.SE, b.HetP}))
	}
	if p := g.Policy; p != nil {
		ts = append(ts, wire.Vector(tHetGlobalPolicy, []float64{float64(p.GainOverNone.N), p.Share, p.Value.Estimate, p.Value.SE,
			p.GainOverNone.Estimate, p.GainOverNone.SE, p.GainOverAll.Estimate, p.GainOverAll.SE}))
	}
	if r := g.Ranked; r != nil {
		var v []float64
		for _, e := range rankedEstimates(r) {
			v = append(v, float64(e.N), e.Estimate, e.SE)
		}
		ts = append(ts, wire.Vector(tHetGlobalRanked, v))
	}
	return ts
}

// rankedLen is the length of het.global.ranked: the rows, the estimate
// and its standard error of each of rankedEstimates.
const rankedLen = 3 * (heterogeneity.Fifths + 1 + 2 + 9)

// rankedEstimates are r's estimates in the order het.global.ranked
// carries them: the fifths, the top minus the bottom, AUTOC, Qini and the
// nine TOC points.
func rankedEstimates(r *heterogeneity.Ranked) []*inference.Estimate {
	var out []*inference.Estimate
	for k := range r.GATES {
		out = append(out, &r.GATES[k])
	}
	out = append(out, &r.TopMinusLow, &r.AUTOC, &r.Qini)
	for k := range r.TOC {
		out = append(out, &r.TOC[k].TOC)
	}
	return out
}

// decodeGlobalHet reads the global tests of heterogeneity of a global-ate
// envelope; rows bounds the run's row count.
func decodeGlobalHet(e *wire.Envelope, rows int) (GlobalHeterogeneity, error) {
	var g GlobalHeterogeneity
	est := func(name string, n int, mean, se float64) (inference.Estimate, error) {
		if se < 0 {
			return inference.Estimate{}, fmt.Errorf("%w: %s: a standard error %v", ErrProtocol, name, se)
		}
		return inference.NewEstimate(mean, se, n), nil
	}
	n := func(name string, x float64) (int, error) {
		if x != math.Trunc(x) || x < 0 || x > float64(rows) {
			return 0, fmt.Errorf("%w: %s over %v rows", ErrProtocol, name, x)
		}
		return int(x), nil
	}
	if _, ok := e.Tensor(tHetGlobalBLP); ok {
		v, err := vector(e, tHetGlobalBLP, 6)
		if err != nil {
			return g, err
		}
		k, err := n(tHetGlobalBLP, v[0])
		if err != nil {
			return g, err
		}
		var b heterogeneity.BLP
		if b.ATE, err = est(tHetGlobalBLP, k, v[1], v[2]); err != nil {
			return g, err
		}
		if b.Het, err = est(tHetGlobalBLP, k, v[3], v[4]); err != nil {
			return g, err
		}
		if b.HetP = v[5]; b.HetP < 0 || b.HetP > 1 {
			return g, fmt.Errorf("%w: %s: a p-value %v", ErrProtocol, tHetGlobalBLP, b.HetP)
		}
		g.BLP = &b
	}
	if _, ok := e.Tensor(tHetGlobalPolicy); ok {
		v, err := vector(e, tHetGlobalPolicy, 8)
		if err != nil {
			return g, err
		}
		k, err := n(tHetGlobalPolicy, v[0])
		if err != nil {
			return g, err
		}
		p := &heterogeneity.Policy{Share: v[1]}
		if p.Share < 0 || p.Share > 1 {
			return g, fmt.Errorf("%w: %s: a share %v", ErrProtocol, tHetGlobalPolicy, p.Share)
		}
		for i, dst := range []*inference.Estimate{&p.Value, &p.GainOverNone, &p.GainOverAll} {
			if *dst, err = est(tHetGlobalPolicy, k, v[2+2*i], v[3+2*i]); err != nil {
				return g, err
			}
		}
		g.Policy = p
	}
	if _, ok := e.Tensor(tHetGlobalRanked); ok {
		v, err := vector(e, tHetGlobalRanked, rankedLen)
		if err != nil {
			return g, err
		}
		r := &heterogeneity.Ranked{GATES: make([]inference.Estimate, heterogeneity.Fifths)}
		for t := 1; t <= 9; t++ {
			r.TOC = append(r.TOC, heterogeneity.TOCPoint{Q: float64(t) / 10})
		}
		for i, dst := range rankedEstimates(r) {
			k, err := n(tHetGlobalRanked, v[3*i])
			if err != nil {
				return g, err
			}
			if *dst, err = est(tHetGlobalRanked, k, v[3*i+1], v[3*i+2]); err != nil {
				return g, err
			}
		}
		g.Ranked = r
	}
	return g, nil
}
