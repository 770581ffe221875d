package main

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/crffd/crffd/federation"
)

// TestServeMetricsOnLoopback checks the daemon's metrics server: an
// address without a host is served on loopback only, another interface is
// refused unless federation.metrics_public, and a bad metrics_public value
// is named.
func TestServeMetricsOnLoopback(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	lis.Close()

	a, err := execute(t, "version", "--config", writeConfig(t, "federation:\n  metrics_address: \":"+port+"\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.serveMetrics(ctx, "site", &federation.Metrics{}); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", "127.0.0.1:"+port); err != nil {
		t.Errorf("metrics not served on loopback: %v", err)
	} else {
		c.Close()
	}
	// Another interface of this machine, if it has one, must not answer.
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, ad := range addrs {
			if ip, ok := ad.(*net.IPNet); ok && !ip.IP.IsLoopback() && ip.IP.To4() != nil {
				if c, err := net.Dial("tcp", net.JoinHostPort(ip.IP.String(), port)); err == nil {
					c.Close()
					t.Errorf("metrics answered on %s", ip.IP)
				}
			}
		}
	}

	for _, tc := range []struct{ body, want string }{
		{"federation:\n  metrics_address: 0.0.0.0:0\n", "set federation.metrics_public: true"},
		{"federation:\n  metrics_address: 0.0.0.0:0\n  metrics_public: maybe\n", `federation.metrics_public "maybe": want true or false`},
	} {
		a, err := execute(t, "version", "--config", writeConfig(t, tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.serveMetrics(ctx, "site", &federation.Metrics{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error containing %q", tc.body, err, tc.want)
		}
	}
	public := writeConfig(t, "federation:\n  metrics_address: 0.0.0.0:0\n  metrics_public: true\n")
	a, err = execute(t, "version", "--config", public)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.serveMetrics(ctx, "site", &federation.Metrics{}); err != nil {
		t.Errorf("metrics_public: true: %v", err)
	}
	// The environment overrides the file, both ways.
	t.Setenv("CRFFD_FEDERATION_METRICS_PUBLIC", "false")
	if a, err = execute(t, "version", "--config", public); err != nil {
		t.Fatal(err)
	}
	if err := a.serveMetrics(ctx, "site", &federation.Metrics{}); err == nil {
		t.Error("CRFFD_FEDERATION_METRICS_PUBLIC=false over metrics_public: true still served 0.0.0.0")
	}
	t.Setenv("CRFFD_FEDERATION_METRICS_PUBLIC", "true")
	t.Setenv("CRFFD_FEDERATION_METRICS_ADDRESS", "0.0.0.0:0")
	if a, err = execute(t, "version"); err != nil {
		t.Fatal(err)
	}
	if err := a.serveMetrics(ctx, "site", &federation.Metrics{}); err != nil {
		t.Errorf("CRFFD_FEDERATION_METRICS_PUBLIC=true: %v", err)
	}
}
