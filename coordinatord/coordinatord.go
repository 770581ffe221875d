// Package coordinatord is the coordinator's daemon: it drives a
// federation's training runs, one after another, over a connection to the
// sites that the caller opens.
//
// Each run is a federation.RunCoordinator over the listed sites. Run
// checkpoints into a coordstore.DB and, restarted after a crash,
// resumes the interrupted run. A run that fails or is refused is logged,
// recorded in the state file's run log, and its checkpoint forgotten; the
// next starts after Config.RetryAfter, doubling after each further failure
// up to 32 times as long. With Config.MinSites below the number of sites, a
// run that sites refused, were refused in or fell silent in is run again
// at once without them while that many remain.
//
// Run stops, returning an error, for what no retry mends: a state file it
// cannot write (ErrStorage), a closed transport
// (federation.ErrTransportClosed) or a checkpoint of other sites
// (federation.ErrCheckpointSites). With Config.Once it returns after one
// run, an error marked ErrRunFailed when that run failed or was refused.
package coordinatord

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/store/coordstore"
)

// Errors with which Run stops, for errors.Is; the messages of the errors
// Run returns are those of their causes.
var (
	// ErrStorage marks a failure to read or write the state file.
	ErrStorage = errors.New("storage failed")
	// ErrRunFailed marks the failed or refused run of Config.Once.
	ErrRunFailed = errors.New("run failed")
)

// Log keys of the daemon's log lines, fixed so that logs can be searched.
const (
	LogKeyRun           = "run"
	LogKeyStatus        = "status"   // how a run ended: completed, refused or failed
	LogKeyError         = "error"    // why it ended so
	LogKeyRetryIn       = "retry_in" // how long until the next attempt
	LogKeySites         = "sites"
	LogKeyWithout       = "without" // the listed sites a run goes on without
	LogKeyMinSites      = "min_sites"
	LogKeyATE           = "ate"        // the AIPW ATE
	LogKeySE            = "ate_se"     // its standard error
	LogKeyPlugInATE     = "plugin_ate" // the mean of the chosen estimator's CATEs
	LogKeyRounds        = "rounds"
	LogKeyRoundSeconds  = "round_seconds"
	LogKeyBytesSent     = "payload_bytes_sent"
	LogKeyBytesReceived = "payload_bytes_received"
	LogKeySeconds       = "seconds"
)

// maxBackoff bounds the doubling of Config.RetryAfter.
const maxBackoff = 32

// Config configures the daemon.
type Config struct {
	// Run is the template of every run: its Sites are every listed site,
	// in priority order, and Logger and Metrics serve the daemon too. Run
	// sets RunID and Checkpoints, and Sites to those a run covers.
	Run federation.CoordinatorConfig
	// MinSites is the fewest sites a run may cover; 0 means every one.
	MinSites int
	// RetryAfter is the wait after a failed or refused run, doubled after
	// each further failure up to maxBackoff times.
	RetryAfter time.Duration
	// RunEvery, when positive, starts a new run this long after a run
	// completed; otherwise Run waits for ctx to end after the first.
	RunEvery time.Duration
	// Once returns after one complete run, failed or not.
	Once bool
	// State holds the checkpoints and the run log; the caller opens and
	// closes it.
	State *coordstore.DB
	// Conn carries the envelopes to and from the sites.
	Conn federation.Conn
	// NewRunID returns the id of a new run.
	NewRunID func() string
	// Finished, when set, is told of every completed run, after it is
	// recorded; an error it returns stops Run.
	Finished func(*federation.Result) error
}

// stopError is an error of kind (ErrStorage, ErrRunFailed) with the
// message of its cause.
type stopError struct{ kind, err error }

func (e *stopError) Error() string   { return e.err.Error() }
func (e *stopError) Unwrap() []error { return []error{e.kind, e.err} }

// mark gives err, when not nil, the kind.
func mark(kind, err error) error {
	if err == nil {
		return nil
	}
	return &stopError{kind: kind, err: err}
}

// storage marks err, when not nil, as a storage failure in the words of
// crffd's other storage errors.
func storage(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrStorage, err)
}

// checkpoints is a Checkpointer whose errors are storage failures, which
// stop the daemon instead of failing a run.
type checkpoints struct{ db *coordstore.DB }

func (s checkpoints) Save(ctx context.Context, st *federation.State) error {
	return storage(s.db.Save(ctx, st))
}

func (s checkpoints) Load(ctx context.Context) (*federation.State, error) {
	st, err := s.db.Load(ctx)
	return st, storage(err)
}

func (s checkpoints) Clear(ctx context.Context) error { return storage(s.db.Clear(ctx)) }

// fatal reports whether a run's error stops the daemon: a storage failure,
// a closed transport, or a checkpoint of other sites, kernels or
// subgroups, which every later run would meet again.
func fatal(err error) bool {
	return errors.Is(err, ErrStorage) || errors.Is(err, federation.ErrTransportClosed) || errors.Is(err, federation.ErrCheckpointSites) ||
		errors.Is(err, federation.ErrCheckpointKernels) || errors.Is(err, federation.ErrCheckpointSubgroups)
}
