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
	kind, err := parseKind(e.Model)
	if err != nil {
		return nil, err
	}
	s.trained(&kind)
	if err := s.countRound(kind); err != nil {
		return nil, err
	}
	w, err := matrices(e, pWeights)
	if err != nil {
		return nil, err
	}
	sh := vectors(e, pShared)
	if err := checkBlocks(s.res.Setup, kind, w, sh); err != nil {
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
		s.cfg.Loss(kind, round, out.Loss)
	}
	ts := append(wire.Matrices(pGrads, out.Grads), wire.Vectors(pShared, out.Shared)...)
	ts = append(ts, wire.Scalar(tLoss, out.Loss), wire.Scalar(tRows, float64(out.Rows)))
	g, err := s.reply(e, wire.KindGradient, ts)
	if err != nil {
		return nil, err
	}
	return []*wire.Envelope{g}, nil
}
