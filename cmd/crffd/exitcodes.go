package main

import "github.com/crffd/crffd/daemon"

// Exit statuses of crffd, besides 0 (success), 1 (any other error) and
// 128+n (stopped by signal n): those of package daemon. The daemons stop
// only for the first three; a failed or refused run is logged, recorded,
// and followed by the next.
const (
	exitConfig    = daemon.ExitConfig
	exitTransport = daemon.ExitTransport
	exitStorage   = daemon.ExitStorage
	exitRunFailed = daemon.ExitRunFailed
)

// withExit gives err, when not nil, the exit status code, unless it has
// one already (daemon.WithExit).
func withExit(code int, err error) error { return daemon.WithExit(code, err) }

// storageError marks err, when not nil, as a storage failure
// (daemon.StorageError).
func storageError(err error) error { return daemon.StorageError(err) }

// fatalRunError returns the error with which a daemon stops after a run
// ended with err, or nil when it goes on (daemon.Fatal).
func fatalRunError(err error) error { return daemon.Fatal(err) }
