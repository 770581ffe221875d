package daemon

import (
	"errors"
	"fmt"
	"testing"

	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/store"
)

// TestFatal: only storage failures and a closed transport stop a
// daemon after a run, each with its documented exit status; refusals,
// silent sites and protocol errors do not.
func TestFatal(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int // 0: the daemon goes on
	}{
		{StorageError(errors.New("disk full")), ExitStorage},
		{fmt.Errorf("publish: %w", store.ErrReadOnly), ExitStorage},
		{&federation.RunError{RunID: "r", Err: federation.ErrTransportClosed}, ExitTransport},
		{&federation.RunError{RunID: "r", Err: federation.ErrTooFewRows}, 0},
		{fmt.Errorf("site2 %w: reason", federation.ErrSiteRefused), 0},
		{fmt.Errorf("%w: site3", federation.ErrSilent), 0},
		{fmt.Errorf("%w: bad tensor", federation.ErrProtocol), 0},
		{fmt.Errorf("publish: %w", store.ErrLocked), 0},
		{StorageError(fmt.Errorf("audit: %w", store.ErrLocked)), 0},
		{fmt.Errorf("%w: sites [a] in the configuration", federation.ErrCheckpointSites), ExitConfig},
		{fmt.Errorf("%w: kernels [laplacian] in the configuration", federation.ErrCheckpointKernels), ExitConfig},
		{fmt.Errorf("%w: subgroups [old] in the configuration", federation.ErrCheckpointSubgroups), ExitConfig},
	} {
		fatal := Fatal(tc.err)
		code := 0
		var ec exitCoder
		if errors.As(fatal, &ec) {
			code = ec.ExitCode()
		}
		if code != tc.code || (fatal != nil && !errors.Is(fatal, tc.err)) {
			t.Errorf("%v: exit %d (%v), want %d", tc.err, code, fatal, tc.code)
		}
	}
	if err := WithExit(ExitConfig, WithExit(ExitStorage, errors.New("x"))); err.(exitCoder).ExitCode() != ExitStorage {
		t.Error("withExit replaced an exit status already set")
	}
	if WithExit(ExitConfig, nil) != nil {
		t.Error("withExit of nil is not nil")
	}
}
