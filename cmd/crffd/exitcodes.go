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
