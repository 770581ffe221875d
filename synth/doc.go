// Package synth generates the synthetic federated data of the CausalRFF paper
// (Vo et al., NeurIPS 2022, Sec. 5.1): sources whose rows share one latent
// confounder model but differ by a shift Δ, with the ground truth needed to
// score effect estimates. Output is in the IHDP layout of package dataset.
//
// # Model
//
// Every row has a latent class z, one-hot over five classes with
// probabilities ρ = [0.11, 0.17, 0.34, 0.26, 0.12]. Given z, a row of a source
// with shift Δ is drawn as
//
//	x_j  ~ Bern(σ(a_j0 + zᵀa_j1)),            j = 1..30 (the proxies)
//	w    ~ Bern(σ(b0 + zᵀ(b1 + Δ)))
//	y(0) ~ N(softplus(0.9 + zᵀ(c1 + Δ)), 1)
//	y(1) ~ N(softplus(7.9 + zᵀ(d1 + Δ)), 1)
//
// where σ is the logistic function, softplus(u) = log(1 + eᵘ), and b1 + Δ
// adds the scalar Δ to every component, so that with z one-hot zᵀ(b1 + Δ) is
// b1 of the row's class plus Δ. The row's covariates are x; its treatment w;
// its factual outcome y(w) and counterfactual outcome y(1-w); and its
// noiseless outcomes mu0 = softplus(0.9 + zᵀ(c1 + Δ)) and
// mu1 = softplus(7.9 + zᵀ(d1 + Δ)), whose difference is the true CATE. The
// latent z itself is not written.
//
// The coefficients a_j0 ∈ R, a_j1 ∈ R⁵, b1, c1, d1 ∈ R⁵ are drawn once per
// seed, independently from N(0, 2), which we read as variance 2 (standard
// deviation √2), and are shared by all sources: the sources live in one
// world and differ only by Δ. The paper gives no value for the intercept b0;
// we take b0 = 0.
//
// # Binary outcomes
//
// The paper's design has real outcomes only. For binary outcomes
// (Design.BinaryOutcome) this package keeps z, x and w as above and replaces
// the outcome model by
//
//	y(0) ~ Bern(σ(-1 + zᵀ(c1 + Δ)))
//	y(1) ~ Bern(σ(+1 + zᵀ(d1 + Δ)))
//
// with mu0 = σ(-1 + zᵀ(c1 + Δ)) and mu1 = σ(1 + zᵀ(d1 + Δ)) the true
// probabilities. The true CATE mu1 - mu0 is then a risk difference in
// (-1, 1), and the true ATE of a set of rows is the mean of mu1 - mu0 over
// them. The intercepts ∓1 replace 0.9 and 7.9, which on the logistic scale
// would make y(1) = 1 almost always.
//
// # Randomness
//
// Generation is deterministic for a Design: the coefficients come from a
// math/rand/v2 PCG source seeded with Design.Seed, and each source from a PCG
// source of its own, derived from the seed and the source's index. So source
// s does not change when more sources are asked for, and since every row
// consumes the same random numbers whatever Δ is, changing the Δ of a source
// changes its treatments and outcomes but not its latent classes or
// covariates. Draws use the samplers of gonum.org/v1/gonum/stat/distuv.
//
// The paper's settings are, for example, 5 sources of 1000 rows with Δ = 0
// for source 1 and Δ = 4 for the others, and 100 sources of 1000 rows with Δ
// drawn from U[0, 8] for each source (see UniformDeltas).
package synth
