package grpcnet

import "time"

// SetCertCheckEvery sets how often transports configured from now on check
// their certificate files, until the test ends.
func SetCertCheckEvery(t interface{ Cleanup(func()) }, d time.Duration) {
	old := certCheckEvery
	certCheckEvery = d
	t.Cleanup(func() { certCheckEvery = old })
}
