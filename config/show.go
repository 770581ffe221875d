package config

import (
	"maps"
	"os"
	"slices"
	"strings"
)

// Origins of an effective configuration value, from the strongest layer.
const (
	OriginFlag    = "flag"
	OriginEnv     = "env"
	OriginFile    = "file"
	OriginDefault = "default"
)

// SecretKeys are shown as "(set)" or "(empty)", never their value.
var SecretKeys = map[string]bool{"federation.secret": true}

// Effective returns the value of s that crffd's commands read, formatted,
// and the layer it came from; flagSet reports whether a flag set s. It
// reads each key the way the commands do: lists with StringList, maps as
// the file's entries with the environment's (EnvMap) over them,
// everything else through viper, whose precedence is flag, environment,
// file, default. Secrets read "(set)" or "(empty)".
func (r Reader) Effective(s Setting, flagSet bool) (value, origin string) {
	origin = OriginDefault
	switch {
	case flagSet:
		origin = OriginFlag
	case envSet(s):
		origin = OriginEnv
	case r.V.InConfig(s.Key):
		origin = OriginFile
	}
	var v string
	switch s.Default.(type) {
	case []string:
		v = strings.Join(r.StringList(s.Key), ",")
	case map[string]string, map[string]float64:
		m := r.StringMap(s.Key)
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, k+"="+m[k])
		}
		v = strings.Join(parts, ",")
	default:
		v = r.V.GetString(s.Key)
	}
	if SecretKeys[s.Key] {
		v = "(empty)"
		if r.V.GetString(s.Key) != "" {
			v = "(set)"
		}
	}
	return v, origin
}

// envSet reports whether the environment sets s: its variable, or for a
// map any of its entries' variables. An empty variable sets nothing, as
// viper (without AllowEmptyEnv) reads it.
func envSet(s Setting) bool {
	if os.Getenv(EnvName(s.Key)) != "" {
		return true
	}
	return IsMap(s.Default) && len(EnvMap(s.Key)) > 0
}
