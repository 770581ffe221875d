package federation

import (
	"context"
	"log/slog"

	"github.com/crffd/crffd/balance"
	"github.com/crffd/crffd/federation/wire"
)

// Tensor names of the balance diagnostics (package balance). A site's
// hello carries its balance sums; the coordinator adds them and sends the
// total back in global-ate, from which each site computes the global
// balance with its own covariate names, which the coordinator never sees.
const (
	tBalanceSums   = "balance.sums"   // hello: the site's balance.Sums (Sums.Vector)
	tBalanceGlobal = "balance.global" // global-ate: every site's sums added; absent when a site sent none
)

// balanceTensors returns the hello's balance tensor: the sums of the site's
// rows, weighted by a logistic propensity fitted on them, which it also
// keeps as the run's SiteResult.LocalBalance. A private site sends none
// unless its privacy.exact names balance (ExactBalance), which releases
// them exactly, outside its guarantee: they are per-arm sums of every
// covariate and of its square, with weights from a propensity fitted on
// the rows, and no noised version of them is built. The run then has no
// global balance. A fit that fails sends none either, since the
// diagnostics are not needed for the run; the site logs why.
func (s *site) balanceTensors(ctx context.Context) []wire.Tensor {
	if p := s.cfg.Privacy; p != nil && !p.IsExact(ExactBalance) {
		return nil
	}
	sums, err := balance.Of(ctx, s.cfg.Data.X, s.cfg.Data.W)
	if err == nil {
		s.res.LocalBalance = &sums
		return []wire.Tensor{wire.Vector(tBalanceSums, sums.Vector())}
	}
	s.log.Warn("no balance diagnostics for this run", slog.String(LogKeyReason, err.Error()))
	return nil
}

// poolBalance adds the sums of the sites' hellos, got[s][wire.KindHello]
// of each site. It returns nil when a site sent none (a private site) or
// sums that do not decode, which it logs, naming the site: the global
// balance needs every site.
func (c *coordinator) poolBalance(got []map[wire.Kind]*wire.Envelope, d int) []float64 {
	var total balance.Sums
	for s, name := range c.cfg.Sites {
		h := got[s][wire.KindHello]
		if _, ok := h.Tensor(tBalanceSums); !ok {
			return nil
		}
		v, err := vector(h, tBalanceSums, 8+6*d)
		var sums balance.Sums
		if err == nil {
			sums, err = balance.FromVector(d, v)
		}
		if err == nil && s == 0 {
			total = sums
		} else if err == nil {
			err = total.Add(sums)
		}
		if err != nil {
			c.log.Warn("no global balance for this run: a site's balance sums do not decode", slog.String(LogKeySite, name), slog.String(LogKeyReason, err.Error()))
			return nil
		}
	}
	return total.Vector()
}

// globalBalance decodes the global balance sums of a global-ate, or nil
// when there are none.
func globalBalance(e *wire.Envelope, d int) (*balance.Sums, error) {
	if _, ok := e.Tensor(tBalanceGlobal); !ok {
		return nil, nil
	}
	v, err := vector(e, tBalanceGlobal, 8+6*d)
	if err != nil {
		return nil, err
	}
	s, err := balance.FromVector(d, v)
	if err != nil {
		return nil, err
	}
	return &s, nil
}
