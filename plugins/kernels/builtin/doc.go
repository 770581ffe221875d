// Package builtin holds the kernels shipped with crffd: Gaussian,
// Laplacian and Matérn. Each is served by its own plugin executable
// (crff-kernel-gaussian, crff-kernel-laplacian, crff-kernel-matern) and is
// tested here in process.
//
// All three are stationary kernels at unit lengthscale, k(a, b) = κ(a − b),
// with κ(0) = 1; their spectral densities are the distributions of the
// base frequencies:
//
//	Gaussian   k = exp(−‖r‖²/2)          ω ~ N(0, I)
//	Laplacian  k = exp(−‖r‖₁)            ω_i ~ Cauchy(0, 1) independently
//	Matérn ν   k = 2^{1−ν}/Γ(ν) (√(2ν)‖r‖)^ν K_ν(√(2ν)‖r‖)
//	                                     ω ~ multivariate Student-t, 2ν degrees of freedom, scale I
//
// Matérn's density ∝ (2ν + ‖ω‖²)^{−(ν+d/2)} is exactly the multivariate t
// with 2ν degrees of freedom and identity scale. Eval is exact for
// half-integer ν = p + 1/2, where K_ν has a closed form.
package builtin
