package config

import (
	"slices"
	"strings"
	"testing"
)

func TestEnvName(t *testing.T) {
	for key, want := range map[string]string{
		"plugin_dir":                         "CRFFD_PLUGIN_DIR",
		"plugin_sha256.crff-kernel-gaussian": "CRFFD_PLUGIN_SHA256_CRFF_KERNEL_GAUSSIAN",
	} {
		if got := EnvName(key); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestParseGridPoint(t *testing.T) {
	k, rest, err := ParseGridPoint([]string{"nu=1.5", "features=100", "linear=0"})
	if err != nil || k.Features != 100 || k.Linear == nil || *k.Linear != 0 || !slices.Equal(rest, []string{"nu=1.5"}) {
		t.Errorf("got %+v, %v, %v; want D 100, γ 0 and nu=1.5 left", k, rest, err)
	}
	if k, rest, err := ParseGridPoint(nil); err != nil || k.Features != 0 || k.Linear != nil || len(rest) != 0 {
		t.Errorf("no fields: %+v, %v, %v; want nothing set", k, rest, err)
	}
	for _, tc := range []struct{ field, want string }{
		{"features=0", `features="0": want a whole number of random frequencies ≥ 1`},
		{"features=1.5", `features="1.5"`},
		{"linear=-1", `linear="-1": want a weight γ ≥ 0`},
		{"linear=NaN", `linear="NaN"`},
		{"linear=+Inf", `linear="+Inf"`},
	} {
		if _, _, err := ParseGridPoint([]string{tc.field}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.field, err, tc.want)
		}
	}
}

func TestMetricsAddress(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		public bool
		want   string // the address listened on; empty when refused
	}{
		{"127.0.0.1:9464", false, "127.0.0.1:9464"},
		{"localhost:9464", false, "localhost:9464"},
		{"[::1]:9464", false, "[::1]:9464"},
		{":9464", false, "127.0.0.1:9464"},
		{"0.0.0.0:9464", false, ""},
		{"[::]:9464", false, ""},
		{"10.1.2.3:9464", false, ""},
		{"metrics.example.org:9464", false, ""},
		{"0.0.0.0:9464", true, "0.0.0.0:9464"},
		{":9464", true, ":9464"},
	} {
		got, err := MetricsAddress(tc.addr, tc.public)
		if tc.want == "" {
			if err == nil || !strings.Contains(err.Error(), "federation.metrics_public: true") || !strings.Contains(err.Error(), tc.addr) {
				t.Errorf("MetricsAddress(%q, %v) = %q, %v; want an error naming the address and federation.metrics_public", tc.addr, tc.public, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("MetricsAddress(%q, %v) = %q, %v; want %q", tc.addr, tc.public, got, err, tc.want)
		}
	}
	if _, err := MetricsAddress("9464", false); err == nil || !strings.Contains(err.Error(), `federation.metrics_address "9464"`) {
		t.Errorf("an address without a port: %v", err)
	}
}

func TestParseKernelParams(t *testing.T) {
	if _, err := ParseKernelParams([]string{"nu"}); err == nil || !strings.Contains(err.Error(), "want NAME=NUMBER") {
		t.Errorf("kernel param without value: err = %v", err)
	}
	if p, err := ParseKernelParams([]string{"nu=2.5"}); err != nil || p["nu"] != 2.5 {
		t.Errorf("nu=2.5: %v, %v", p, err)
	}
}

func TestParseDelimiter(t *testing.T) {
	for in, want := range map[string]rune{"": 0, "comma": ',', "Semicolon": ';', "tab": '\t', `\t`: '\t', "pipe": '|', ":": ':'} {
		if got, err := ParseDelimiter(in); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"ab", `"`, "\n", "\x00", "\xff", "semi"} {
		if _, err := ParseDelimiter(bad); err == nil || !strings.Contains(err.Error(), "--delimiter") {
			t.Errorf("%q: %v, want an error naming --delimiter", bad, err)
		}
	}
}
