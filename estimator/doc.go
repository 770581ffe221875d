// Package estimator implements CausalRFF (Vo, Bhattacharyya, Lee and Leong,
// "An Adaptive Kernel Approach to Federated Learning of Heterogeneous Causal
// Effects", NeurIPS 2022): random Fourier feature models of the propensity,
// the outcome and a latent-confounder VAE, trained across sites with
// adaptively shared weights, and the CATE/ATE estimates drawn from them.
//
// The package is pure computation. Kernels arrive as base frequencies through
// the Spectral interface; rows arrive as Data; nothing here touches SQL,
// the network or plugins.
//
// # Federated form
//
// Training a model alternates two functions, which are the whole protocol:
//
//   - (*Site).Compute runs at a site on its own rows. Given the site's
//     effective weights W_c^s and the shared parameters (a SiteInput), it
//     returns the site's loss J^(s), G_c^s = ∂J^(s)/∂W_c^s and the gradients
//     of the shared parameters (a SiteOutput).
//   - (*Coordinator).Update combines every site's output into the exact
//     gradient of J = Σ_s J^(s) + regularisers with respect to the per-site
//     weights θ, the transfer logits ρ and the shared parameters, and takes
//     one optimiser step. (*Coordinator).Inputs then gives the next round's
//     SiteInputs.
//
// Train (the simulated federation) calls exactly these two functions, so a
// network layer that carries SiteInput and SiteOutput between daemons gets
// bit-identical models. Both messages are plain data: named matrices and
// named vectors of float64.
//
// # Determinism and noise
//
// Every random draw is a pure function of Config.Seed and a stream key, so a
// site daemon can regenerate what the simulated federation draws:
//
//   - base frequencies Ω0 of feature map k: Spectral.Sample(d, D, Seed⊕k);
//   - the latent model's reparameterisation noise ε of site s:
//     PCG(Seed, mix(stream, s, SiteInput.Noise)), drawn draw-major over the
//     site's rows in their original order. With L-BFGS Noise is 0 in every
//     round (the draws are held fixed, the paper's "complete dataset" form);
//     with Adam Noise is the round number (fresh draws each round);
//   - effect-estimation samples of row i at site s:
//     PCG(Seed, mix(stream, s, i)), so a row's CATE does not depend on which
//     other rows are scored with it.
//
// # Standardisation
//
// A federation may not pool rows, so whatever is standardised must come from
// shared scalars. Each site reports Moments (row count, per-column sums and
// sums of squares) of its continuous covariates and outcome; NewScaler turns
// the sites' Moments into pooled means and standard deviations, which every
// site then applies to its own rows. Binary covariates are left as 0/1. A
// continuous outcome is centred and scaled only when Config.StandardizeY is
// set (the default); effects are always reported in the outcome's original
// units.
//
// # Departures from DESIGN.md §3
//
// The latent model's decoder gives a continuous y the variance e^{2t} with a
// learned shared t (penalised ζ_t t², like the outcome model's) instead of a
// fixed unit variance: with a fixed variance the weight of the y term, and
// so how much of y the latent z encodes, depends on the outcome's units.
//
// Two additions to the feature maps and the outcome's units, both on by
// default (Config.Linear, Config.LogOutcome) and both off with Linear = 0,
// LogOutcome = LogNever, which gives the method exactly as DESIGN.md states:
//
//   - Every feature map also carries its input linearly, φ(u) = [RFF(u),
//     γ·u/√d], which is the sum of the plugin's kernel and a linear kernel:
//     still a kernel method, with the same weights, transfer and gradients.
//     With 50-row sites a Gaussian kernel with one learned lengthscale
//     cannot extrapolate the (log-)linear response surfaces of IHDP's NPCI
//     replicates; the linear part can.
//   - A continuous outcome whose training values are all positive is
//     modelled as log y when the Box–Cox profile likelihood of the pooled
//     outcomes prefers λ = 0 to λ = 1 (Scaler.LogYPreferred; computed from
//     shared sums of log y, never rows). Effects and Nuisance map a mean m on
//     the log scale back as the log-normal mean exp(m + s²/2), with s the
//     model's learned noise scale, not the median exp(m). On IHDP replicates 9 and 10 the control surface is exp(xᵀβ), the
//     true CATE has a standard deviation of 10–25, and this is what brings
//     them into reach.
//
// On IHDP (replicates 1–10, three sources, see TestExperiment) the
// latent-path √PEHE went from 3.11 (neither) to 3.05 (log only), 2.75
// (log, γ = 1) and 2.32 (log, γ = 2, ζ_y = 0.1), tracking the validation
// error by which γ was chosen (3.84, 3.84, 3.48, 2.70).
//
// Learned transfer factors may carry a prior, Beta(1+κ, 1) on every λ
// (Config.TransferPrior; the default 0 gives the paper's unpenalised λ).
// The paper learns λ by fitting the training rows alone, which always
// rewards per-site weights: between identical sites (the synthetic design
// with Δ = 0) the outcome and latent models' λ drifted from ½ down to
// 0.37–0.47, and learned transfer was 12% worse than pooling. κ = 200
// brings that to 5% (five sources; `crffd eval --transfer-prior 200`) and
// lowers the validation error there and on IHDP, but it raises both the
// validation and the test error of the paper's 100-source setting (see
// DefaultConfig), so it is not the default.
//
// What λ does not do here: in the outcome and latent models it does not
// tell similar sites from dissimilar ones. With Δ = 0,4,4,4,4 (seed 1,
// replicates 1–4) and ρ given ten times Adam's step so that it can move
// freely, unpenalised λ toward the dissimilar source 1 averaged 0.32 in
// the latent model, and λ among the four alike sources 0.37; with Δ = 0
// everywhere 0.37 and 0.37. Only the propensity model separated them (0.28–0.50
// toward source 1, 0.83–0.99 among the others). What protects source 1
// from dissimilar sites is its own weights θ^1, which enter its W^1 with
// factor 1: with κ = 200 and the default step, its λ are 0.81–0.85
// with Δ = 4 (replicates 1 and 2) and its √PEHE stays far below full transfer's. With ten
// times the step and κ = 200 every λ rose to 0.91–1.00 and source 1's
// √PEHE rose too (1.76 against 1.17 over replicates 1–4), which is why ρ
// keeps Adam's common step.
//
// Where the gap between identical sites comes from: the latent model's
// transfer alone. With Δ = 0 everywhere (five sources, ten replicates,
// scratch runs that set the transfer mode per model), pooling the latent
// model while learning λ in the other two gives √PEHE 1.150, full
// transfer's 1.172; learning the latent model's λ while pooling the other
// two gives 1.307, learned transfer's 1.309. Raising λ is not enough:
// taking the latent model's ρ gradient from each site's validation rows
// instead of its training rows (a first-order bilevel step, scratch)
// raised those λ from 0.35–0.42 to 0.65–0.88 on replicate 1 and left the
// ten-replicate √PEHE at 1.309. Even λ = 0.8 leaves every site free to fit
// its own rows, since W^s − W^v = (1 − λ)(θ^s − θ^v) and θ is penalised
// lightly (ζ = 0.03); ten times every ζ gave 1.281 against full's 1.139,
// the same ratio.
//
// The CATE is still the latent decoder's f_y1(z) − f_y0(z) of DESIGN.md §3.
// The outcome model's own f_β1(x) − f_β0(x) was measured as an alternative:
// it is better on replicates 5, 9 and 10 and worse on the others (mean
// √PEHE 2.77 against 2.32 with L-BFGS, 2.72 against 1.84 with the Adam
// defaults that replaced it), and its validation error is
// about the same, so nothing on training and validation rows favours
// departing from the paper here.
//
// For a binary outcome the encoder is q(z|x) = N(φ_q(x)ᵀW_q, diag(s_q²)),
// one weight block "q" on x alone, instead of DESIGN.md's
// q(z|x,y,w) with one block per arm on [x, y] (Setup.EncodesOutcome). With
// the arm-wise encoder, f_y0 is trained only on the codes W_q0 gives control
// rows and f_y1 only on those W_q1 gives treated rows; the counterfactual
// head is then read at codes of the other arm's encoder, which nothing in
// the objective ties to the codes it was fitted on, and the codes also carry
// each row's own y. On the binary design of package synth (seed 2, three
// sources of 1000 rows, source 1 scored) the factual heads were calibrated
// (control rows: mean f_y0 0.230 against mean y 0.228; treated rows: mean
// f_y1 0.864 against 0.861) but the counterfactual ones were not (treated
// rows: f_y0 0.111 against a true 0.228; control rows: f_y1 0.915 against
// 0.838), the same with the observed (w, y) in place of the imputed ones,
// so the ATE was 0.728 against 0.606. With q(z|x) both heads are fitted and
// read on codes of one encoder: the ATE of seeds 1, 2 and 3 went from
// 0.329, 0.728 and 0.399 to 0.226, 0.657 and 0.450 with L-BFGS, the
// default then (true 0.174, 0.606 and 0.380; TestSynthBinaryOutcomeATE);
// with the Adam defaults they are 0.223, 0.651 and 0.495 (with κ = 200:
// 0.216, 0.650 and 0.505). Seeds 4 to 10 (CRFFD_BINARY_SEEDS=4-10) give
// errors 0.030, 0.086, 0.011, 0.068, 0.039, 0.031 and 0.103: within 0.05
// on six of the ten seeds, mean absolute error 0.058 over all ten. Seed 3 looks worse, but before the change its control and treated
// means were both too high (by 0.059 and 0.079) and cancelled; after it the
// control mean is right (0.108 against 0.104) and the treated one is as
// before. The generative model and its ELBO are unchanged; only the
// variational family is smaller, which with many proxy covariates loses
// little, since (w, y) then say little about z beyond x.
// Effects draws z from q(z|x) directly; with Config.MHSteps > 0 the
// sampler still targets p(z|x,y_l,w_l). A continuous outcome keeps the
// DESIGN's encoder: on IHDP (three sources, all ten replicates) q(z|x)
// raised the validation error from 2.70 to 3.14. The errors left with
// L-BFGS (0.052, 0.051, 0.070) are not this one: in seed 1 every row of one latent class is treated, so its y(0)
// is not identified; in seed 2 the counterfactual means are off by what the
// scored source's own factual means are off from mu0 and mu1 (the learned
// λ are near 0, so that source is fitted almost alone); in seed 3 the codes
// carry less of the class than x does, and 300 L-BFGS rounds leave the
// latent loss far from converged (900 rounds: 0.436). With L-BFGS and
// λ ≡ 1 (full transfer) seeds 1 and 2 come within 0.05 (0.206, 0.637) and seed 3 does
// not (0.524).
//
// Under the Adam defaults the seed-3 error (0.115) comes from one latent
// class: 36% of source 1, treated in 8% of its rows (another class: 95%),
// true y(1) probability 0.06, estimated 0.50 (the outcome model p(y|x,w)
// says 0.32). The proxies identify the class for 97% of rows (naive Bayes
// with the empirical class frequencies), so among treated rows those that
// look like this class are partly misread rows of treated-heavy classes:
// hidden confounding that x alone does not remove, which the latent model
// is meant to, but here does only in part. A per-arm logistic regression
// on x gives 0.52 against the true 0.380. No setting we tried brings it
// within 0.05: 2000 rounds 0.474, L-BFGS 0.443, Metropolis–Hastings with 100
// steps 0.495, dz = 5 0.457, initial log-sd −3 0.467, step 0.02 or 0.05
// 0.477 or 0.471, no linear kernel (Linear 0) 0.506. The decoder's learned
// log-scale a_z ends near −1.8, a very smooth kernel in z, but that is not
// the cause: with a_z held at 0 or −0.75 (a scratch change, not kept) the
// class's estimated y(1) stayed at 0.52 and 0.51. Held at 0 the ATE came to
// 0.394, but only because the control means of other classes rose to
// cancel it.
// An encoder on [x, w], q(z|x,w) with one block, which lets a treated row
// that looks like this class be coded as a treated-heavy class, gave
// 0.219, 0.660 and 0.479 for seeds 1, 2 and 3 (with κ = 0): seed 2 then
// misses too, so it was not kept. With κ = 200 seed 3 gives 0.505; scoring
// source 1's own rows by Metropolis–Hastings towards p(z|x,w,y) with each
// row's observed w and y, rather than imputed ones, left it at 0.505 with
// 20 and with 100 steps (a scratch change, not kept).
//
// # Nuisances and cross-fitting
//
// Model.Nuisance gives the propensity and the outcome model's means in the
// outcome's units, the nuisances of the doubly robust estimates of package
// inference. CrossFit refits the propensity and outcome models on folds of
// one site's rows (Config.Folds) so that every row's nuisances come from
// models that did not see it; it trains on the site's rows alone, so a
// federation spends no rounds on it.
//
// Regularisers are added by the coordinator, which holds θ; SiteOutput.Loss
// carries the data terms only, so Σ_s Loss plus the penalties is J.
package estimator
