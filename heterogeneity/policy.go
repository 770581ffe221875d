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

// PolicySums are the sums of a set of rows from which a rule's Policy
// follows: the rows it treats, and the sums of the per-row scores of its
// value, its gain over treating no one and its gain over treating
// everyone. Sums of rows of several sites add (Add), so that a
// federation's Policy equals that of its pooled rows.
type PolicySums struct {
	Treated                  int
	Value, GainNone, GainAll inference.Sums // Value.N is 0 without control scores
}

// NewPolicySums returns the sums of the rule treat over rows whose
// control-arm scores are gamma0 (nil: no Value) and whose effect scores
// are psi.
func NewPolicySums(gamma0, psi []float64, treat []bool) (PolicySums, error) {
	n := len(psi)
	if len(treat) != n || gamma0 != nil && len(gamma0) != n {
		return PolicySums{}, fmt.Errorf("%w: %d scores, %d control scores and %d decisions", ErrInput, n, len(gamma0), len(treat))
	}
	value, none, all := make([]float64, n), make([]float64, n), make([]float64, n)
	var out PolicySums
	for i, p := range psi {
		if !finite(p) || gamma0 != nil && !finite(gamma0[i]) {
			return PolicySums{}, fmt.Errorf("%w: row %d: score %v", ErrInput, i, p)
		}
		var pi float64
		if treat[i] {
			pi = 1
			out.Treated++
		}
		none[i], all[i] = pi*p, -(1-pi)*p
		if gamma0 != nil {
			value[i] = gamma0[i] + pi*p
		}
	}
	out.GainNone, out.GainAll = inference.Accumulate(none), inference.Accumulate(all)
	if gamma0 != nil {
		out.Value = inference.Accumulate(value)
	}
	return out, nil
}

// Add returns the sums of the rows of s and t. Where either has no Value,
// neither has.
func (s PolicySums) Add(t PolicySums) PolicySums {
	out := PolicySums{Treated: s.Treated + t.Treated, GainNone: s.GainNone.Add(t.GainNone), GainAll: s.GainAll.Add(t.GainAll)}
	if s.Value.N == s.GainNone.N && t.Value.N == t.GainNone.N {
		out.Value = s.Value.Add(t.Value)
	}
	return out
}

// Policy returns the rule's evaluation from its sums; it needs at least
// two rows.
func (s PolicySums) Policy() (*Policy, error) {
	n := s.GainNone.N
	if n < 2 || s.GainAll.N != n || s.Treated < 0 || s.Treated > n {
		return nil, fmt.Errorf("%w: sums of %d rows (%d treated); want at least 2", ErrInput, n, s.Treated)
	}
	out := &Policy{Share: float64(s.Treated) / float64(n)}
	var err error
	if out.GainOverNone, err = s.GainNone.Estimate(); err != nil {
		return nil, err
	}
	if out.GainOverAll, err = s.GainAll.Estimate(); err != nil {
		return nil, err
	}
	if s.Value.N == n {
		if out.Value, err = s.Value.Estimate(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// NewPolicy evaluates the rule treat over rows whose control-arm scores
// are gamma0 (nil: no Value) and whose effect scores are psi. Each figure
// is a mean of per-row scores with the standard error sd/√n, which holds
// the rule fixed: it must have been fitted on other rows.
func NewPolicy(gamma0, psi []float64, treat []bool) (*Policy, error) {
	if len(psi) < 2 {
		return nil, fmt.Errorf("%w: %d scores; want at least 2", ErrInput, len(psi))
	}
	s, err := NewPolicySums(gamma0, psi, treat)
	if err != nil {
		return nil, err
	}
	return s.Policy()
}
