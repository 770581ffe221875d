// Package deps has no code. Its test keeps the import graph's promises,
// which nothing else checks: the packages that read rows and certificates,
// the kernel plugin SDK and every plugin executable do not link the
// estimator or the other heavy packages of crffd, and the leaf packages
// import nothing of crffd at all.
package deps
