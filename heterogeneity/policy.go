package heterogeneity

import (
	"fmt"

	"github.com/crffd/crffd/inference"
)

// Policy is the AIPW evaluation of a treatment rule π(x) ∈ {0, 1}.
type Policy struct {
	// Value is the mean outcome had each row been treated as π says,
	// mean(Γ0 + π·ψ), with Γ0 the control arm's doubly robust score.
	Value inference.Estimate
	// Share is the share of rows the rule treats.
	Share float64
	// GainOverNone is mean(π·ψ), the value minus treating no one's; and
	// GainOverAll is −mean((1 − π)·ψ), the value minus treating everyone's.
	GainOverNone, GainOverAll inference.Estimate
}

// NewPolicy evaluates the rule treat over rows whose control-arm scores
// are gamma0 (nil: no Value) and whose effect scores are psi. Each figure
// is a mean of per-row scores with the standard error sd/√n, which holds
// the rule fixed: it must have been fitted on other rows.
func NewPolicy(gamma0, psi []float64, treat []bool) (*Policy, error) {
	n := len(psi)
	if len(treat) != n || gamma0 != nil && len(gamma0) != n || n < 2 {
		return nil, fmt.Errorf("%w: %d scores, %d control scores and %d decisions; want at least 2 of each", ErrInput, n, len(gamma0), len(treat))
	}
	value, none, all := make([]float64, n), make([]float64, n), make([]float64, n)
	var treated int
	for i, p := range psi {
		if !finite(p) || gamma0 != nil && !finite(gamma0[i]) {
			return nil, fmt.Errorf("%w: row %d: score %v", ErrInput, i, p)
		}
		var pi float64
		if treat[i] {
			pi = 1
			treated++
		}
		none[i], all[i] = pi*p, -(1-pi)*p
		if gamma0 != nil {
			value[i] = gamma0[i] + pi*p
		}
	}
	out := &Policy{Share: float64(treated) / float64(n)}
	var err error
	if out.GainOverNone, err = inference.Accumulate(none).Estimate(); err != nil {
		return nil, err
	}
	if out.GainOverAll, err = inference.Accumulate(all).Estimate(); err != nil {
		return nil, err
	}
	if gamma0 != nil {
		if out.Value, err = inference.Accumulate(value).Estimate(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
