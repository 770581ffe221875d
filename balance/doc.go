// Package balance measures, before any effect is estimated, whether the
// treated and control rows of a site (or of a federation) are comparable:
// arm counts, the standardised mean difference of every covariate before and
// after inverse-propensity weighting, the effective sample size the weights
// leave in each arm, and a plain verdict on overlap.
//
// The diagnostics are built from sufficient statistics ([Sums]): per arm,
// the row count and per covariate the sums and sums of squares, raw and
// weighted. A site computes its Sums with [Collect]; a federation adds the
// sites' Sums with [Sums.Add] and reads the global diagnostics from the
// total with [Summarise], so that no row leaves a site.
//
// The weights are ATE weights, 1/e(x) for a treated row and 1/(1−e(x)) for
// a control row, where e is the propensity of [Propensity]: a logistic
// regression of the treatment on the standardised covariates with a small
// ridge penalty, the default of R's cobalt and WeightIt and of DoWhy's
// propensity weighting. It is a diagnostic model, fitted per site, and not
// CausalRFF's propensity model: balance is checked before any training.
//
// The standardised mean difference of a covariate x is
//
//	SMD = (mean_t − mean_c) / √((s²_t + s²_c)/2)
//
// with s² the unweighted variance within each arm, also after weighting (as
// cobalt does), so that the two SMDs of a covariate are on one scale and the
// change between them is the change of the means alone. A binary covariate
// is standardised the same way (its s² is p(1−p)·n/(n−1)). An |SMD| above
// [Threshold] is the usual mark of imbalance.
package balance
