// Package kernels is the kernel plugin interface of crffd.
//
// A kernel plugin is a separate executable named crff-kernel-<name>. It
// draws the base frequencies Ω0 of random Fourier features from the
// kernel's spectral density at unit lengthscale (Sample) and evaluates the
// kernel exactly (Eval), which the host uses to check that the features
// φ(a)ᵀφ(b) approximate k(a, b). Features themselves are computed by the
// host; a plugin is called once per model, never per record, and never
// sees a record.
//
// The plugin side implements Kernel and calls Serve from main. The host
// side calls Open, which launches the plugin under hashicorp/go-plugin
// (gRPC, AutoMTLS, protocol version 1) and returns a Client.
//
// Sample must be deterministic: the same dimension, count, seed and
// parameters give the same frequencies on every run and platform, because
// every site of a federation must compute its features from identical
// frequencies. NewSource gives every kernel the same seeding convention, and
// Columns draws frequencies one column at a time so that the first D
// columns do not depend on the count requested.
package kernels
