// Package inference computes the doubly robust (AIPW) average treatment
// effect, its influence-function standard error and interval, and their
// combination over sites from sums alone.
//
// Given at n rows the treatment w_i ∈ {0, 1}, the outcome y_i and nuisance
// predictions fitted on other rows — the propensity ê(x_i) and the outcome
// means μ̂0(x_i), μ̂1(x_i) — Scores returns the efficient influence
// function values
//
//	ψ_i = μ̂1 − μ̂0 + w(y − μ̂1)/ê − (1 − w)(y − μ̂0)/(1 − ê),
//
// with ê clipped to [η, 1 − η]. Their mean is the AIPW estimate of the ATE,
// consistent when either the propensity or the outcome model is right, and
// sd(ψ)/√n is its standard error when both converge fast enough and were
// fitted on rows other than the ones scored (cross-fitting or sample
// splitting; Chernozhukov et al. 2018).
//
// A site never sends ψ. It sends Sums (n, Σψ, Σψ²), and any set of sites'
// Sums add up to those of their pooled rows, so a federation's estimate
// (Sums.Estimate of the added Sums) equals the estimate on the pooled rows,
// which pooling assumes one target population.
//
// Calibration corrects a CATE estimate τ̂ with the same pseudo-outcomes: a
// ridge regression of ψ − τ̂(x) on [1, x] and τ̂'s part not linear in x
// (the DR-learner with τ̂ as offset),
// shrunk toward no correction by the James–Stein factor of its Wald
// statistic, with sandwich intervals whose coverage is measured, not
// assumed. Analyse computes both from a site's rows.
//
// Folds assigns rows to cross-fitting folds, stratified by arm.
//
// The formulas and their sources are collected in docs/concepts.md of the
// repository, under "Formulas and sources".
package inference
