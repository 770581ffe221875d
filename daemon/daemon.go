// Package daemon holds what crffd's long-running daemons share: why a
// daemon stops, as the exit status the command returns; the /healthz and
// /metrics endpoint (ServeHealth); and the transport client as a
// federation.Conn (Conn).
//
// A daemon stops for a configuration it cannot use, a transport that
// failed or closed, a file it cannot write, or (when asked to take part in
// one run) a run that failed. Every other failure of a run is logged and
// recorded, and the daemon waits for the next run. The errors of this
// package keep the message of the error they mark, so a log line reads
// the same whether or not an exit status is attached.
package daemon

import (
	"errors"
	"fmt"

	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/store"
)

// Exit statuses of a daemon, besides 0 (success), 1 (any other error)
// and 128+n (stopped by signal n).
const (
	ExitConfig    = 2 // the configuration is invalid, or names a plugin or address that cannot be used
	ExitTransport = 3 // the transport plugin or its certificates failed, or the transport closed
	ExitStorage   = 4 // the site file or the coordinator's state file cannot be written
	ExitRunFailed = 5 // with --once: the run failed or was refused (crff_run_log says why)
)

// exitError is an error that sets the exit status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// ExitCode returns the exit status the error sets.
func (e *exitError) ExitCode() int { return e.code }

// exitCoder is an error that sets the exit status.
type exitCoder interface{ ExitCode() int }

// WithExit gives err, when not nil, the exit status code, unless it has
// one already. The result has err's message and matches err (errors.Is),
// and its method ExitCode returns the status.
func WithExit(code int, err error) error {
	var ec exitCoder
	if err == nil || errors.As(err, &ec) {
		return err
	}
	return &exitError{code: code, err: err}
}

// ErrStorage marks a failure to write the site file or the coordinator's
// state file, which stops a daemon (ExitStorage).
var ErrStorage = errors.New("storage failed")

// StorageError marks err, when not nil, as a storage failure (ErrStorage);
// a lock another writer held (store.ErrLocked) is not one, and passes
// unmarked.
func StorageError(err error) error {
	if err == nil || errors.Is(err, store.ErrLocked) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrStorage, err)
}

// Fatal returns the error with which a daemon stops after a run ended
// with err, or nil when the daemon goes on to the next run: only a storage
// failure, a closed transport, or checkpoints of other sites than those
// configured stop it.
func Fatal(err error) error {
	switch {
	case errors.Is(err, ErrStorage) || isStoreFailure(err):
		return WithExit(ExitStorage, err)
	case errors.Is(err, federation.ErrTransportClosed):
		return WithExit(ExitTransport, err)
	case errors.Is(err, federation.ErrCheckpointSites) || errors.Is(err, federation.ErrCheckpointKernels) || errors.Is(err, federation.ErrCheckpointSubgroups):
		return WithExit(ExitConfig, err)
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
