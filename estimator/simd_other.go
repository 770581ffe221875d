//go:build !amd64 || purego

package estimator

// asm reports that this build has the assembly kernels: it has not, on
// this architecture or under the build tag purego, so kernelGo, adamGo
// and sincosGo run.
const asm = false

// vectorKernels is empty: there are no vector tile kernels.
var vectorKernels map[string]tileKernel

// vectorSincos is empty: there are no vector sincos kernels.
var vectorSincos map[string]func(cos, sin, x []float64, scale, c float64)
