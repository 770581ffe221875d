// Package evaluate reproduces the benchmark tables of the CausalRFF paper:
// for each replicate file, each transfer mode and each number of training
// sources, it fits the federation on the training rows of the first k
// sources and scores the test rows of the test source against the ground
// truth, then summarises the runs as mean ± standard error.
//
// The files are in the IHDP layout of package dataset, with the sources as
// equal consecutive blocks and each source split, in order, into training,
// test and validation rows. Test rows are only ever scored: nothing is
// fitted or chosen on them.
package evaluate
