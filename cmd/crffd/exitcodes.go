package main

import (
	"errors"
	"fmt"

	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/store"
)

// Exit statuses of crffd, besides 0 (success), 1 (any other error) and
// 128+n (stopped by signal n). The daemons stop only for the first three;
// a failed or refused run is logged, recorded, and followed by the next.
const (
	exitConfig    = 2 // the configuration is invalid, or names a plugin or address that cannot be used
	exitTransport = 3 // the transport plugin or its certificates failed, or the transport closed
	exitStorage   = 4 // the site file or the coordinator's state file cannot be written
	exitRunFailed = 5 // with --once: the run failed or was refused (crff_run_log says why)
)

// exitError is an error that sets crffd's exit status (exitCoder).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// ExitCode implements exitCoder.
func (e *exitError) ExitCode() int { return e.code }

// withExit gives err, when not nil, the exit status code, unless it has
// one already.
func withExit(code int, err error) error {
	var ec exitCoder
	if err == nil || errors.As(err, &ec) {
		return err
	}
	return &exitError{code: code, err: err}
}

// errStorage marks a failure to write the site file or the coordinator's
// state file, which stops a daemon (exitStorage).
var errStorage = errors.New("storage failed")

// storageError marks err, when not nil, as a storage failure; a lock
// another writer held (store.ErrLocked) is not one, and passes unmarked.
func storageError(err error) error {
	if err == nil || errors.Is(err, store.ErrLocked) {
		return err
	}
	return fmt.Errorf("%w: %w", errStorage, err)
}

// fatalRunError returns the error with which a daemon stops after a run
// ended with err, or nil when the daemon goes on to the next run: only a
// storage failure or a closed transport stops it.
func fatalRunError(err error) error {
	switch {
	case errors.Is(err, errStorage) || isStoreFailure(err):
		return withExit(exitStorage, err)
	case errors.Is(err, federation.ErrTransportClosed):
		return withExit(exitTransport, err)
	case errors.Is(err, federation.ErrCheckpointSites):
		return withExit(exitConfig, err)
	}
	return nil
}

// isStoreFailure reports errors of package store that no retry mends: a
// file that is not (or no longer) a site file, or one open read-only.
func isStoreFailure(err error) bool {
	for _, e := range []error{store.ErrCorrupt, store.ErrReadOnly, store.ErrClosed, store.ErrNotSite, store.ErrSchemaTooNew, store.ErrNotSQLite} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
