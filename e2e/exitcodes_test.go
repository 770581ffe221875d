package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDaemonExitStatuses: each documented cause of a daemon's stop at
// start has its exit status (docs/operations.md, "Exit statuses"): 2 for a setting
// that cannot be used, 3 for a transport or certificate failure, 4 for a
// file that cannot be opened or written; and the error names what failed.
func TestDaemonExitStatuses(t *testing.T) {
	for _, tc := range []struct {
		name, role string
		federated  bool
		edit       func(t *testing.T, dir, cfg string)
		code       int
		want       string
	}{
		{"scoring site, poll_interval not a duration", "site", false, appendSetting("site:\n", "  poll_interval: 5 seconds\n"), 2, "site.poll_interval"},
		{"scoring site, busy_timeout not a duration", "site", false, appendSetting("site:\n", "  busy_timeout: soon\n"), 2, "site.busy_timeout"},
		{"scoring site, not an SQLite file", "site", false, overwrite("site1.sqlite", "not a database"), 4, "site1.sqlite"},
		{"federated site, poll_interval not a duration", "site", true, appendSetting("site:\n", "  poll_interval: 5 seconds\n"), 2, "site.poll_interval"},
		{"federated site, busy_timeout not a duration", "site", true, appendSetting("site:\n", "  busy_timeout: soon\n"), 2, "site.busy_timeout"},
		{"federated site, weak secret", "site", true, setSecret("hunter2hunter2"), 2, "federation.secret is too weak"},
		{"federated site, not an SQLite file", "site", true, overwrite("site1.sqlite", "not a database"), 4, "site1.sqlite"},
		{"coordinator, certificate missing", "coordinator", true, overwrite("certs/coordinator/coordinator.crt", ""), 3, "coordinator.crt"},
		{"coordinator, state file in a missing folder", "coordinator", true, replace("state_db: coordinator.sqlite", "state_db: missing/folder/state.sqlite"), 4, "state.sqlite"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dir, cfg string
			if tc.federated {
				dir = sandbox(t, 2, 40, "grpc")
				name := "site1"
				if tc.role == "coordinator" {
					name = "coordinator"
				}
				cfg = filepath.Join(dir, name+".yaml")
			} else {
				dir, cfg = simulateSite(t, 40, "") // no federation settings: the site only scores
			}
			tc.edit(t, dir, cfg)
			d := startDaemon(t, tc.role, tc.role, "--config", cfg, "--once")
			if code := d.wait(t, time.Minute); code != tc.code || !strings.Contains(d.err.String(), tc.want) {
				t.Errorf("exit %d, want %d, with an error naming %q:\n%s", code, tc.code, tc.want, d.err.String())
			}
		})
	}
}

// appendSetting adds lines after the section header of the configuration.
func appendSetting(section, lines string) func(t *testing.T, dir, cfg string) {
	return func(t *testing.T, _, cfg string) { editFile(t, cfg, section, section+lines) }
}

// setSecret replaces the sandbox site's federation.secret.
func setSecret(secret string) func(t *testing.T, dir, cfg string) {
	return func(t *testing.T, _, cfg string) {
		b, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile(`(?m)^  secret: .*$`)
		if !re.Match(b) {
			t.Fatalf("%s has no federation.secret", cfg)
		}
		if err := os.WriteFile(cfg, re.ReplaceAll(b, []byte("  secret: "+secret)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// replace replaces text in the configuration.
func replace(from, to string) func(t *testing.T, dir, cfg string) {
	return func(t *testing.T, _, cfg string) { editFile(t, cfg, from, to) }
}

// overwrite replaces the file at rel, in the sandbox, with content.
func overwrite(rel, content string) func(t *testing.T, dir, cfg string) {
	return func(t *testing.T, dir, _ string) {
		if err := os.WriteFile(filepath.Join(dir, rel), []byte(content), 0o600); err != nil {
			t.Fatal(fmt.Errorf("overwrite %s: %w", rel, err))
		}
	}
}
