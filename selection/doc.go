// Package selection chooses a CATE estimator on held-out rows without
// counterfactuals, from sums that sites can share.
//
// On a validation row i with treatment w_i, outcome y_i and doubly robust
// pseudo-outcome ψ_i (inference.Scores, with nuisances cross-fitted on all
// of the site's rows, so that a row's ψ comes from models that never saw
// it, and ψ is the same for every candidate), the loss of a candidate CATE
// τ̂ is
//
//	l_i(τ̂) = (ψ_i − τ̂(x_i))².
//
// Because E[ψ | x] = τ(x) when either nuisance model is right, the mean
// of l over rows estimates E[(τ − τ̂)²] (the PEHE) plus a constant that is
// the same for every candidate, so differences between candidates estimate
// differences in PEHE (the DR-learner loss of Kennedy 2023; the R-loss of
// Nie and Wager 2021 is the other common choice, but its weights
// (w − ê)² favour rows with extreme propensities, and its value is not in
// the units of the effect).
//
// The constant is large: it carries the variance of ψ, which dwarfs the
// differences between good candidates on a few hundred rows. So Scores
// compares each candidate with a reference (the configured default) row
// by row: the paired difference d_i = l_i(τ̂) − l_i(τ̂_ref) cancels the
// shared noise. Sites send the Pairs sums: n, and per pair of candidates
// Σ l_a·l_b and Σ e_a·e_b of the losses and of the residuals e = ψ − τ̂.
// They add up over sites to the sums of the pooled rows, and every
// candidate's Sums (n, Σl, Σl², Σd, Σd²) against any reference derive
// from them.
//
// The selection's result is not one candidate but an Ensemble (Combine):
// the equally weighted mean CATE of the members, the candidates whose mean
// paired difference from the candidate of least loss is at most Z of its
// standard errors (those the validation rows cannot tell from the best),
// plus a shift. The Pairs sums give every paired difference and the
// mean's loss. The shift re-centres the mean on each site's doubly robust
// ATE: a site's gap g is the mean of ψ over all its rows (its Centre sums)
// minus the members' mean CATE there; Recentre pools the sites' gaps as a
// random-effects meta-analysis (DerSimonian–Laird), so that alike sites
// share one pooled gap and unlike sites keep nearer their own, and each
// site's shift is its gap g shrunk by its standard error s to
// g·max(0, 1 − s²/g²). Ensembled appends the ensemble to the candidates
// as the chosen one; an Estimator of kind KindEnsemble computes its CATE
// from its Members, each with the kernel whose model it needs, plus its
// site's shift (Estimator.AtSite).
//
// Run does the whole selection for sites' rows and their validation
// rows: it fits the candidates (Options: the CausalRFF latent CATE and the
// outcome model's μ̂1 − μ̂0 for each kernel, and the T-learner and
// DR-learner on the first kernel's outcome features, for each ridge
// penalty), scores them and forms the ensemble with Decide. Result.CATE gives any
// candidate's CATE of new rows, and Result.Estimator the chosen one in a
// form a site keeps with its model (Estimator.CATE applies it, and
// Estimator.CATEModels an ensemble over several kernels). Holdout
// draws a site's validation rows, stratified by arm, and SiteHoldout draws
// them within a federation's bound on the rows behind a sum.
//
// Run is built from the parts a federation computes, so that a federation
// of the same rows chooses the same candidate bit for bit: each site's
// SiteStats (estimator.RidgeStats of its training rows, per arm and of its
// training pseudo-outcomes), which Stats.Add pools and RidgeCandidates
// solves into the ridge candidates at the coordinator; then each site's
// SiteLosses (SiteSums), whose Pairs Pairs.Add pools and whose Centres
// Decide takes site by site.
//
// A differentially private site computes its parts otherwise (private.go):
// KeyedHoldout, PrivateSiteStats and PrivateSiteLosses give sums whose
// every term depends on its row alone and is clipped, NoiseStats and
// SiteSums.Noise add the Gaussian noise, and the noise's variances travel
// with the sums (Stats.Noise, Pairs.ResVar, Centre.ResVar), so that
// RidgeCandidates raises the penalty of a noised Gram matrix, and the
// scores' standard errors and the ensemble's shifts include the noise.
package selection
