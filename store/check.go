package store

import (
	"fmt"
	"math"
)

// checkResults reports the first malformed value of res, wrapping
// ErrBadResult, before anything is written.
func checkResults(res Results) error {
	if err := checkCATE(res.CATE); err != nil {
		return err
	}
	if err := checkATE(res.ATE); err != nil {
		return err
	}
	return checkTransfer(res.Transfer)
}

func finite(fs ...float64) bool {
	for _, f := range fs {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
	}
	return true
}

func checkCATE(cs []CATE) error {
	seen := make(map[RowID]bool, len(cs))
	for _, c := range cs {
		switch {
		case !c.RowID.Valid():
			return fmt.Errorf("%w: CATE for id %s: an id is an integer or a text", ErrBadResult, c.RowID)
		case seen[c.RowID]:
			return fmt.Errorf("%w: two CATEs for id %s", ErrBadResult, c.RowID)
		case !finite(c.CATE, c.Latent, c.LatentSD, c.LatentQ025, c.LatentQ975, c.Y0, c.Y1, c.Propensity):
			return fmt.Errorf("%w: CATE for id %s: a value is not finite", ErrBadResult, c.RowID)
		case c.LatentSD < 0 || c.LatentQ025 > c.LatentQ975:
			return fmt.Errorf("%w: CATE for id %s: negative latent sd or 2.5%% quantile above the 97.5%%", ErrBadResult, c.RowID)
		case !optionalInterval(c.SE, c.Lower, c.Upper):
			return fmt.Errorf("%w: CATE for id %s: se %v and interval [%v, %v] are not a standard error and an interval, nor all absent", ErrBadResult, c.RowID, c.SE, c.Lower, c.Upper)
		case c.Propensity < 0 || c.Propensity > 1:
			return fmt.Errorf("%w: CATE for id %s: propensity outside [0, 1]", ErrBadResult, c.RowID)
		case math.IsInf(c.Raw, 0) || math.IsInf(c.PSI, 0):
			return fmt.Errorf("%w: CATE for id %s: uncalibrated CATE %v or AIPW score %v is infinite", ErrBadResult, c.RowID, c.Raw, c.PSI)
		}
		seen[c.RowID] = true
	}
	return nil
}

func checkATE(as []ATE) error {
	type key struct {
		scope     Scope
		estimator string
	}
	seen := map[key]bool{}
	for _, a := range as {
		k := key{a.Scope, a.Estimator}
		nan := math.IsNaN(a.SE)
		switch {
		case a.Scope != ScopeLocal && a.Scope != ScopeGlobal:
			return fmt.Errorf("%w: ATE scope %q: must be local or global", ErrBadResult, a.Scope)
		case a.Estimator != EstimatorAIPW && a.Estimator != EstimatorPlugIn:
			return fmt.Errorf("%w: %s ATE estimator %q: must be %s or %s", ErrBadResult, a.Scope, a.Estimator, EstimatorAIPW, EstimatorPlugIn)
		case seen[k]:
			return fmt.Errorf("%w: two %s %s ATEs", ErrBadResult, a.Scope, a.Estimator)
		case !finite(a.ATE) || math.IsInf(a.SE, 0) || a.SE < 0:
			return fmt.Errorf("%w: %s %s ATE: ate not finite or se negative or infinite", ErrBadResult, a.Scope, a.Estimator)
		case nan != math.IsNaN(a.Lower) || nan != math.IsNaN(a.Upper) || math.IsInf(a.Lower, 0) || math.IsInf(a.Upper, 0) || a.Lower > a.Upper:
			return fmt.Errorf("%w: %s %s ATE: interval [%v, %v] with se %v", ErrBadResult, a.Scope, a.Estimator, a.Lower, a.Upper, a.SE)
		case a.N <= 0:
			return fmt.Errorf("%w: %s %s ATE over %d rows", ErrBadResult, a.Scope, a.Estimator, a.N)
		case a.Sites != nil && a.Scope != ScopeGlobal:
			return fmt.Errorf("%w: %s %s ATE with sites: only a global ATE covers sites", ErrBadResult, a.Scope, a.Estimator)
		case !(a.NoiseSE >= 0) || math.IsInf(a.NoiseSE, 0) || !nan && a.NoiseSE > a.SE*(1+1e-9):
			return fmt.Errorf("%w: %s %s ATE: noise se %v of an se of %v", ErrBadResult, a.Scope, a.Estimator, a.NoiseSE, a.SE)
		case a.Clipped < -1 || a.Clipped > a.N:
			return fmt.Errorf("%w: %s %s ATE: %d clipped rows of %d", ErrBadResult, a.Scope, a.Estimator, a.Clipped, a.N)
		}
		seen[k] = true
	}
	return nil
}

func checkTransfer(ts []Transfer) error {
	type key struct{ peer, model string }
	seen := map[key]bool{}
	for _, t := range ts {
		k := key{t.Peer, t.Model}
		switch {
		case t.Peer == "" || t.Model == "":
			return fmt.Errorf("%w: transfer factor with empty peer or model", ErrBadResult)
		case seen[k]:
			return fmt.Errorf("%w: two transfer factors to %q for %q", ErrBadResult, t.Peer, t.Model)
		case !finite(t.Lambda) || t.Lambda < 0 || t.Lambda > 1:
			return fmt.Errorf("%w: transfer factor to %q for %q outside [0, 1]", ErrBadResult, t.Peer, t.Model)
		}
		seen[k] = true
	}
	return nil
}

// optionalInterval reports whether se, lower and upper are all NaN, or a
// finite non-negative standard error with a finite interval lower ≤ upper.
func optionalInterval(se, lower, upper float64) bool {
	if math.IsNaN(se) && math.IsNaN(lower) && math.IsNaN(upper) {
		return true
	}
	return finite(se, lower, upper) && se >= 0 && lower <= upper
}
