package estimator

import (
	"math"
	"strings"
	"testing"
)

// TestConfigValidate checks that every invalid setting is refused with an
// error naming it, and that the defaults are valid.
func TestConfigValidate(t *testing.T) {
	if err := func() *Config { c := DefaultConfig(); return &c }().validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	cases := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"features", func(c *Config) { c.Features = 0 }, "Features"},
		{"latent", func(c *Config) { c.Latent = -1 }, "Latent"},
		{"draws", func(c *Config) { c.Draws = 0 }, "Draws"},
		{"ridge", func(c *Config) { c.ZetaLatent = -0.1 }, "ridge"},
		{"linear", func(c *Config) { c.Linear = -1 }, "Linear"},
		{"transfer prior negative", func(c *Config) { c.TransferPrior = -1 }, "TransferPrior"},
		{"transfer prior NaN", func(c *Config) { c.TransferPrior = math.NaN() }, "TransferPrior"},
		{"transfer prior infinite", func(c *Config) { c.TransferPrior = math.Inf(1) }, "TransferPrior"},
		{"rounds", func(c *Config) { c.Rounds = 0 }, "Rounds"},
		{"learning rate", func(c *Config) { c.LearningRate = 0 }, "LearningRate"},
		{"method", func(c *Config) { c.Method = 7 }, "method"},
		{"transfer", func(c *Config) { c.Transfer = 9 }, "transfer mode"},
		{"samples", func(c *Config) { c.Samples = 0 }, "Samples"},
		{"log outcome", func(c *Config) { c.LogOutcome = 5 }, "LogOutcome"},
		{"mh steps", func(c *Config) { c.MHSteps = -1 }, "MHSteps"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error naming %q", err, tc.want)
			}
		})
	}
}
