package site

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestRunRefusesIncompleteConfig: a configuration without a site file, a
// kernel opener or a positive poll interval, or a federated one without
// its hooks, is refused before anything runs, as a configuration error.
func TestRunRefusesIncompleteConfig(t *testing.T) {
	s := newRowsSite(t, "site1", 20, 1)
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "Config.DB"},
		{Config{DB: s.db}, "Config.OpenKernel"},
		{Config{DB: s.db, OpenKernel: (&scorer{}).spectral}, "poll interval 0s"},
		{Config{DB: s.db, OpenKernel: (&scorer{}).spectral, PollInterval: 1, Federation: &Federation{}}, "Federation.Kernels"},
	} {
		err := Run(context.Background(), tc.cfg)
		var ec interface{ ExitCode() int }
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &ec) || ec.ExitCode() != 2 {
			t.Errorf("%+v: %v, want a configuration error naming %s", tc.cfg, err, tc.want)
		}
	}
}
