package config

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/crffd/crffd/certs"
)

// NewLogger returns the logger of log_level and log_format, writing to w.
func NewLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log_level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log_format %q: want text or json", format)
}

// CertRequest returns the certificate request of crffd certs issue (or,
// with renew, renew) for name, from its --role, --host (hostsSet when
// given) and --days flags. Issue's role defaults to site, and a
// coordinator's hosts to certs.LocalHosts; renew keeps the old
// certificate's unless the flags say otherwise.
func CertRequest(name, role string, hosts []string, hostsSet bool, days int, renew bool) (certs.Request, error) {
	req := certs.Request{Name: name, Validity: time.Duration(days) * 24 * time.Hour}
	if days < 0 {
		return req, fmt.Errorf("--days %d: want a positive number of days", days)
	}
	if role != "" || !renew {
		if role == "" {
			role = "site"
		}
		var err error
		if req.Role, err = certs.ParseRole(role); err != nil {
			return req, fmt.Errorf("--role: %w", err)
		}
	}
	if hostsSet {
		req.Hosts = hosts
	} else if !renew && req.Role == certs.RoleCoordinator {
		req.Hosts = certs.LocalHosts
	}
	return req, nil
}
