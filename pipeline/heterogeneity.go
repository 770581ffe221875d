package pipeline

import (
	"fmt"
	"io"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/heterogeneity"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/store"
)

// HeterogeneityInput are the rows a run's heterogeneity is tested on:
// those held out of the CATE's training (Held, indices of the rows of the
// other fields), with their scores ψ and Γ0, the chosen estimator's CATE
// before calibration, its calibration (nil: none; the rule
// cate_lower_above_0 then reads the CATE itself), and the covariates X
// with their names.
type HeterogeneityInput struct {
	Held         []int
	PSI, Control []float64
	CATE         []float64
	Calibration  *inference.Calibration
	X            mat.Matrix
	Columns      []string
	Thresholds   []float64 // the τ̂ thresholds of the rules cate_above_T
}

// minHeldPerFifth is the fewest held-out rows per fifth of τ̂ the tests
// are computed from: a mean and its spread need two.
const minHeldPerFifth = 2

// Heterogeneity returns the local rows of crff_heterogeneity, crff_clan
// and crff_policy (package heterogeneity) of in, or nil with the reason
// when there are too few held-out rows. Only the held-out rows are read
// and calibrated.
func Heterogeneity(in HeterogeneityInput) (*store.Heterogeneity, string, error) {
	n := len(in.Held)
	if least := heterogeneity.Fifths * minHeldPerFifth; n < least {
		return nil, fmt.Sprintf("%d rows held out of the CATE's training; the tests need %d", n, least), nil
	}
	if _, d := in.X.Dims(); len(in.Columns) != d {
		return nil, "", fmt.Errorf("%d covariate names for %d covariates", len(in.Columns), d)
	}
	h, err := heterogeneity.PickHeld(in.Held, in.PSI, in.Control, in.CATE, in.X, in.Calibration)
	if err != nil {
		return nil, "", err
	}
	psi, gamma0, cate := h.PSI, h.Control, h.CATE
	out := &store.Heterogeneity{}
	stat := func(name string, e inference.Estimate, p float64) {
		out.Stats = append(out.Stats, store.HetStat{Scope: store.ScopeLocal, Statistic: name, Estimate: e, PValue: p})
	}
	sums, err := h.BLPSums()
	if err != nil {
		return nil, "", err
	}
	if blp, err := sums.BLP(); err == nil {
		stat("blp_ate", blp.ATE, -1)
		stat("blp_het", blp.Het, blp.HetP)
	}
	g, err := heterogeneity.NewGATES(psi, cate, heterogeneity.Fifths)
	if err != nil {
		return nil, "", err
	}
	rate, err := heterogeneity.NewRATE(psi, cate)
	if err != nil {
		return nil, "", err
	}
	out.Stats = append(out.Stats, RankedStats(store.ScopeLocal, g.Groups, g.TopMinusLow, *rate)...)
	clan, err := heterogeneity.NewCLAN(g, h.X)
	if err != nil {
		return nil, "", err
	}
	for _, c := range clan {
		out.CLAN = append(out.CLAN, store.CLAN{Scope: store.ScopeLocal, Covariate: in.Columns[c.Column], Top: c.Top, Bottom: c.Low, Spread: c.Spread})
	}
	rule := func(name string, pi []bool) error {
		p, err := heterogeneity.NewPolicy(gamma0, psi, pi)
		if err != nil {
			return err
		}
		out.Policy = append(out.Policy, store.Policy{Scope: store.ScopeLocal, Policy: name, Treats: p.Share, Value: p.Value, GainNone: p.GainOverNone, GainAll: p.GainOverAll})
		return nil
	}
	if err := rule(heterogeneity.RuleLowerAbove0, h.LowerAbove0()); err != nil {
		return nil, "", err
	}
	for _, t := range in.Thresholds {
		pi := make([]bool, n)
		for j, c := range cate {
			pi[j] = c > t
		}
		if err := rule(fmt.Sprintf("cate_above_%g", t), pi); err != nil {
			return nil, "", err
		}
	}
	return out, "", nil
}

// RankedStats are the rows of crff_heterogeneity of scope that rank rows
// by τ̂: the GATES of each fifth (gates_1, …), the top minus the bottom,
// the AUTOC, the Qini and the TOC (toc_10, …, toc_90).
func RankedStats(scope store.Scope, gates []inference.Estimate, topMinusLow inference.Estimate, rate heterogeneity.RATE) []store.HetStat {
	var out []store.HetStat
	stat := func(name string, e inference.Estimate) {
		out = append(out, store.HetStat{Scope: scope, Statistic: name, Estimate: e, PValue: -1})
	}
	for k, e := range gates {
		stat(fmt.Sprintf("gates_%d", k+1), e)
	}
	stat("gates_top_minus_bottom", topMinusLow)
	stat("autoc", rate.AUTOC)
	stat("qini", rate.Qini)
	for _, p := range rate.TOC {
		stat(fmt.Sprintf("toc_%d", int(p.Q*100+0.5)), p.TOC)
	}
	return out
}

// WriteHeterogeneity writes one line of h's main figures, as crffd fit
// prints them: the BLP loading with its p-value, the top fifth minus the
// bottom one and the AUTOC; nothing for nil h.
func WriteHeterogeneity(w io.Writer, h *store.Heterogeneity) error {
	if h == nil {
		return nil
	}
	by := map[string]store.HetStat{}
	for _, s := range h.Stats {
		by[s.Statistic] = s
	}
	blp, gates, autoc := by["blp_het"], by["gates_top_minus_bottom"], by["autoc"]
	e := func(s store.HetStat) string {
		return fmt.Sprintf("%.3g [%.3g, %.3g]", s.Estimate.Estimate, s.Estimate.Lower, s.Estimate.Upper)
	}
	_, err := fmt.Fprintf(w, "heterogeneity on %d held-out rows: BLP loading %s, p = %.2g (1: the CATE is calibrated, 0: it captures none); top fifth minus bottom %s; AUTOC %s (crff_heterogeneity)\n",
		blp.Estimate.N, e(blp), blp.PValue, e(gates), e(autoc))
	return err
}
