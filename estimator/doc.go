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
// # Departures from the paper
//
// docs/concepts.md in the repository states the model, and
// docs/benchmarks.md holds the experiments behind each of these:
//
//   - The latent decoder gives a continuous y the variance e^{2t}, with a
//     learned shared t penalised ζ_t t², instead of a unit variance, so that
//     how much of y the latent z encodes does not depend on y's units.
//   - Every feature map also carries its input linearly, φ(u) = [RFF(u),
//     γ·u/√d] (Config.Linear): the sum of the plugin's kernel and a linear
//     kernel, with the same weights, transfer and gradients.
//   - A continuous outcome whose training values are all positive is
//     modelled as log y when the Box–Cox profile likelihood of the pooled
//     outcomes prefers λ = 0 to λ = 1 (Config.LogOutcome,
//     Scaler.LogYPreferred; computed from shared sums, never rows). Effects
//     and Nuisance map a mean m on the log scale back as the log-normal mean
//     exp(m + s²/2), not the median exp(m).
//   - For a binary outcome the encoder is q(z|x), one weight block "q" on x
//     alone (Setup.EncodesOutcome), instead of q(z|x,y,w) with one block per
//     arm on [x, y]; Effects then draws z from q(z|x), and with
//     Config.MHSteps > 0 the sampler still targets p(z|x,y_l,w_l).
//   - Learned transfer factors may carry a prior, Beta(1+κ, 1) on every λ
//     (Config.TransferPrior); the default 0 gives the paper's unpenalised λ.
//
// Linear = 0 and LogOutcome = LogNever give the paper's feature maps and
// outcome units; the learned variance and the binary outcome's encoder
// have no switch.
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
