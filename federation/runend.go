package federation

import "errors"

// RunStatus is how a run ended.
type RunStatus string

// Run statuses, as crff_coordinator_run_log records them.
const (
	RunCompleted RunStatus = "completed"
	RunRefused   RunStatus = "refused" // a site refused the run, or the coordinator a site
	RunFailed    RunStatus = "failed"  // any other reason
)

// RunEnd is how one run ended, and why when it did not complete.
type RunEnd struct {
	Run    string
	Status RunStatus
	Reason string
}

// EndOf returns how the run ended with err (nil: completed): refused when
// err says a site refused the run (ErrSiteRefused) or the coordinator
// refused a site (ErrSchema, ErrFrequencies), failed otherwise.
func EndOf(run string, err error) RunEnd {
	switch {
	case err == nil:
		return RunEnd{Run: run, Status: RunCompleted}
	case errors.Is(err, ErrSiteRefused), errors.Is(err, ErrSchema), errors.Is(err, ErrFrequencies),
		errors.Is(err, ErrTooFewRows), errors.Is(err, ErrRowsChanged), errors.Is(err, ErrTooFewChanged):
		return RunEnd{Run: run, Status: RunRefused, Reason: err.Error()}
	}
	return RunEnd{Run: run, Status: RunFailed, Reason: err.Error()}
}
