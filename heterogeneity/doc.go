// Package heterogeneity tests whether a CATE estimate τ̂ captures real
// variation in the treatment effect, and how well it ranks rows for
// treatment, from the doubly robust scores ψ of rows τ̂ was not trained on.
//
// Every statistic is a function of ψ, whose mean over any set of rows is
// the AIPW estimate of that set's average effect (package inference):
//
//   - BLP, the best linear predictor of Chernozhukov, Demirer, Duflo and
//     Fernández-Val (2018): the least-squares regression of ψ on
//     [1, τ̂ − τ̄] with heteroskedasticity-robust (HC1) standard errors.
//     β1 estimates the ATE and β2 the loading on τ̂: 1 when τ̂ is
//     calibrated, 0 when it captures no heterogeneity. β2's p-value is
//     one-sided (H0: β2 ≤ 0), as grf's test_calibration reports it.
//   - GATES, the AIPW effect in each fifth of τ̂ (by its quantiles over the
//     rows), and the top fifth minus the bottom one.
//   - CLAN, the covariate means of the top and bottom fifths.
//   - RATE, by grf's definitions (Yadlowsky et al. 2021): with rows ranked
//     by τ̂ from the largest, TOC(q) is the mean ψ of the top q of rows
//     minus the mean of all; AUTOC = ∫₀¹ TOC(q) dq and Qini = ∫₀¹ q·TOC(q)
//     dq. On n rows both are weighted means of the ranked ψ whose weights
//     sum to zero; their standard errors treat the ranking as fixed, which
//     leaves out the variance of the quantiles of τ̂ (small next to the
//     scores', and measured rather than assumed).
//   - Policy value: for a rule π(x) ∈ {0, 1}, the AIPW value
//     mean(Γ0 + π·ψ), the share it treats, and its gains over treating no
//     one, mean(π·ψ), and over treating everyone, −mean((1 − π)·ψ), each
//     with the standard error of a mean of scores.
//
// The intervals are normal intervals at inference.Level. They are valid
// when τ̂ and the rule were fitted on other rows than the ones whose ψ
// enter (held out or cross-fitted); on the rows τ̂ was trained on, τ̂ and
// ψ share noise and every statistic overstates heterogeneity.
//
// BLPSums and PolicySums are sums that add over sites (Pool re-centres
// each site's BLPSums, taken about its own mean τ̂, on a common one), so
// that a federation's BLP and policy value equal those of its pooled
// rows. GATES, CLAN and the RATE rank rows by τ̂, and here take the ranks
// of one set of rows. Over sites, which share no cut point of τ̂, each
// site's rows go into Buckets of at least a few rows close in τ̂, and
// NewRanked ranks the pooled buckets, each bucket's rows tied.
package heterogeneity
