// Package e2e holds end-to-end tests: they build crffd and its plugins and
// run them as real processes, the way an operator would.
package e2e
