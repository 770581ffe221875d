// Package synth generates synthetic federated data with known causal
// effects: the design of the CausalRFF paper (Vo et al., NeurIPS 2022, Sec.
// 5.1), whose sources share one latent confounder model but differ by a
// shift Δ, and four simple confounded designs with a stated true effect,
// for measuring the bias and interval coverage of estimators. Every design
// comes with the ground truth needed to score effect estimates. Output is in
// the IHDP layout of package dataset. Design.Name chooses the design; see
// DesignNames.
//
// # The paper's design
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
// # Simple designs
//
// The designs linear-constant, linear-varying, lognormal, binary and rough have
// three covariates, in this order: age (years), sex (0 or 1) and score,
// drawn independently as
//
//	age   ~ N(50, 10²),   sex ~ Bern(0.5),   score ~ N(Δ, 1)
//
// where Δ is the shift of the row's source (0 unless Design.Delta says
// otherwise): in these designs Δ moves the mean of score, and with it the
// treated share and, where the effect depends on score, the ATE. Write
// a = (age - 50)/10, which is N(0, 1). The treatment is confounded by age
// and score (not by sex):
//
//	w ~ Bern(σ(0.8·a + 0.8·score))
//
// At Δ = 0 the linear predictor is N(0, 1.28), so the treated share is
// exactly 0.5 in expectation and 99.1% of the propensities lie within
// [0.05, 0.95] (94.8% within [0.1, 0.9]). Treated rows are older and score
// higher: E[a | w=1] - E[a | w=0] = E[score | w=1] - E[score | w=0] =
// 3.2·E[σ'(N(0, 1.28))] = 0.635, that is 6.35 years of age.
//
// For each design below, mu0 and mu1 are the true conditional means
// E[y(0) | x] and E[y(1) | x], their difference the true CATE, and the true
// ATE, E[mu1 - mu0] over the covariate distribution, is given at Δ = 0 and
// as a function of Δ (PopulationATE computes it). The factual outcome is
// y(w) and the counterfactual y(1-w), each drawn with its own independent
// noise.
//
// linear-constant: a linear outcome and a constant effect,
//
//	mu0 = 1 + 1.0·a + 0.5·sex + 1.5·score
//	mu1 = mu0 + 2
//	y(0) = mu0 + ε0,   y(1) = mu1 + ε1,   ε0, ε1 ~ N(0, 1)
//
// The CATE is 2 in every row, exactly: mu1 - mu0 == 2 holds in floating
// point (to make it so, the stored mu0 may differ from the formula by one
// rounding error). True ATE 2 for every Δ. The naive difference of the
// arms' mean outcomes is 2 + 2.5·0.635 = 3.59 at Δ = 0.
//
// linear-varying: the same y(0), and an effect that grows with sex and
// score,
//
//	τ(x) = 1.5 + 1.0·sex + 1.0·score
//	mu1  = mu0 + τ(x),   y(1) = mu1 + ε1
//
// True ATE 1.5 + 0.5 + Δ = 2 + Δ, so exactly 2 at Δ = 0. The CATE has
// variance 1.25.
//
// lognormal: a positive outcome with a multiplicative effect,
//
//	m(x) = 0.3·a + 0.2·sex + 0.5·score
//	y(w) = exp(m(x) + 0.75·w + 0.8·ε_w),   ε0, ε1 ~ N(0, 1)
//	mu0  = exp(m(x) + 0.32),   mu1 = exp(m(x) + 0.75 + 0.32)
//
// (0.32 = 0.8²/2), so that y(w)/mu_w = exp(0.8·ε_w - 0.32) has mean 1. The
// true ATE is
//
//	(e^0.75 - 1) · e^(0.32 + 0.3²/2 + 0.5²/2 + 0.5·Δ) · (1 + e^0.2)/2
//	  = 2.025139 · e^(0.5·Δ),
//
// about 2.0251 at Δ = 0 (E[mu0] = 1.8130 there). The effect is
// multiplicative, mu1/mu0 = e^0.75 = 2.117 in every row, so the CATE,
// 1.117·mu0, varies with x.
//
// binary: a binary outcome from a logistic model,
//
//	η(x) = -0.5 + 0.5·a + 0.3·sex + 0.8·score
//	mu0  = σ(η(x)),   mu1 = σ(η(x) + 1),   y(w) ~ Bern(mu_w)
//
// The CATE is a risk difference in (0, 0.245). Given sex, η is normal with
// mean -0.5 + 0.3·sex + 0.8·Δ and variance 0.5² + 0.8² = 0.89, so the true
// ATE is ½ Σ_sex E[σ(η + 1) - σ(η) | sex], a one-dimensional integral: by
// Gauss–Hermite quadrature it is 0.206024 at Δ = 0 (0.2060236556). It has
// no closed form in Δ.
//
// rough: the linear designs' y(0), and an effect that is a rough random
// function of score,
//
//	τ(x) = 2 + r(score),   mu1 = mu0 + τ(x),   y(1) = mu1 + ε1
//
// where r is drawn once per seed (the same function in every source): a
// random-feature draw, with 2000 features, of the Gaussian process with the
// Matérn-½ (exponential) kernel exp(−|u − u'|/0.25), so that r has
// variance 1 and a path that is continuous but nowhere smooth at the scale
// of the data. It is the design on which a rough kernel (Laplacian,
// Matérn ν = ½) should be chosen over the Gaussian. Its ATE depends on the
// seed: take the mean of Table.Tau.
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
// The simple designs draw each source from two PCG sources of their own,
// with stream constants different from the paper's: one for the covariates
// and the treatment, one for the outcome noise. For one seed the four simple
// designs therefore have the same covariates and treatments, and
// linear-constant and linear-varying the same y(0); a shift Δ moves score
// by Δ and leaves age and sex unchanged.
//
// The paper's settings are, for example, 5 sources of 1000 rows with Δ = 0
// for source 1 and Δ = 4 for the others, and 100 sources of 1000 rows with Δ
// drawn from U[0, 8] for each source (see UniformDeltas).
package synth
