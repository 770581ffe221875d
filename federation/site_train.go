package federation

import (
	"context"
	"fmt"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
)

// compute answers one training round.
func (s *site) compute(ctx context.Context, e *wire.Envelope) ([]*wire.Envelope, error) {
	if s.train == nil {
		return nil, fmt.Errorf("%w: weights before the dedup-verdict", ErrProtocol)
	}
	kind, k, err := parseModel(e.Model)
	if err != nil {
		return nil, err
	}
	if k >= len(s.setups) {
		return nil, fmt.Errorf("%w: model %s of kernel %d in a run of %d kernels", ErrProtocol, e.Model, k, len(s.setups))
	}
	s.trained(e.Model)
	if err := s.countRound(e.Model); err != nil {
		return nil, err
	}
	w, err := matrices(e, pWeights)
	if err != nil {
		return nil, err
	}
	sh := vectors(e, pShared)
	if err := checkBlocks(s.setups[k], kind, w, sh); err != nil {
		return nil, err
	}
	if err := s.trainOn(k); err != nil {
		return nil, err
	}
	round, err := integer(e, tRound)
	if err != nil {
		return nil, err
	}
	noise, err := integer(e, tNoise)
	if err != nil {
		return nil, err
	}
	out, err := s.train.Compute(ctx, &estimator.SiteInput{Model: kind, Round: round, Noise: uint64(noise), Weights: w, Shared: sh})
	if err != nil {
		return nil, err
	}
	if s.cfg.Loss != nil {
		s.cfg.Loss(modelLabel(kind, k, s.res.Kernels[1:]), round, out.Loss)
	}
	ts := append(wire.Matrices(pGrads, out.Grads), wire.Vectors(pShared, out.Shared)...)
	ts = append(ts, wire.Scalar(tLoss, out.Loss), wire.Scalar(tRows, float64(out.Rows)))
	g, err := s.reply(e, wire.KindGradient, ts)
	if err != nil {
		return nil, err
	}
	return []*wire.Envelope{g}, nil
}

// trainOn makes s.train train the models of kernel k. The kernels are
// trained one after the other, so the site keeps one kernel's features of
// its training rows at a time.
func (s *site) trainOn(k int) error {
	if k == s.trainKernel {
		return nil
	}
	s.train.Release()
	t, err := estimator.NewSiteRows(s.res.Index, s.kept, s.trainPos, s.setups[k])
	if err != nil {
		return err
	}
	s.train, s.trainKernel = t, k
	return s.privatize()
}
