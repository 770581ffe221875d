// Package estimator computes CausalRFF: random Fourier features, the three
// models, their losses and gradients, optimisers and effect estimation. It is
// pure computation: no SQL, no network, no plugins.
package estimator
