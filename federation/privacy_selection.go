package federation

import (
	"context"
	"crypto/hmac"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/selection"
)

// Model selection at a private site (SitePrivacy).
//
// A private site holds its rows out by a coin keyed by the row
// (selection.KeyedHoldout), whether or not it releases the selection's
// sums with noise: its training rounds are private only if adding or
// removing a row leaves the other rows' split as it was. Unless
// SitePrivacy.Exact names ExactSelection, it then releases the stats and
// the losses with noise (selection.NoiseStats, selection.SiteSums.Noise:
// clipped terms of the row alone, pseudo-outcomes from the run's own
// private models), StatsPieces + LossPieces Gaussian mechanisms charged as
// StepSelection in the hello, and tells the coordinator the noise's
// variances (tStatsNoise, tLossNoise), which the coordinator's ridge and
// standard errors take into account.

// Tensors of a private site's selection answers: the variances of the
// noise it added.
const (
	tStatsNoise = "stats.noise"  // stats: per Gram entry of arm0, arm1 and dr
	tLossNoise  = "losses.noise" // losses: per entry of pair_res, pair_loss, centre.res, centre.ressq
)

// selectionReleases returns the noised releases of model selection's
// statistics at a private site (see releases): the stats' and the
// losses' Gaussian mechanisms, charged whatever candidates the run asks
// for, when the run selects a model and the site does not release them
// exactly.
func (s *site) selectionReleases() []release {
	if !s.noisySelection() {
		return nil
	}
	return []release{{step: StepSelection, count: selection.StatsPieces + selection.LossPieces, share: ShareSelection}}
}

// noisySelection reports whether the site releases the run's model
// selection sums with noise.
func (s *site) noisySelection() bool {
	p := s.cfg.Privacy
	return p != nil && s.share > 0 && !p.IsExact(ExactSelection)
}

// processKey keys a private site's holdout when the site has no
// federation secret: drawn once per process.
var processKey = sync.OnceValues(func() ([]byte, error) {
	k := make([]byte, 32)
	if _, err := crand.Read(k); err != nil {
		return nil, fmt.Errorf("privacy: drawing the holdout key: %w", err)
	}
	return k, nil
})

// holdoutKey returns the key of a private site's holdout in run: an HMAC
// of the run's id under the sites' federation secret, which the
// coordinator does not know, so that a site restarted within the run
// holds out the same rows; without a secret, under a key drawn once per
// process.
func (s *site) holdoutKey() ([]byte, error) {
	key := s.cfg.ColumnKey
	if len(key) == 0 {
		var err error
		if key, err = processKey(); err != nil {
			return nil, err
		}
	}
	h := hmac.New(sha256.New, key)
	h.Write([]byte("crffd holdout\x00" + s.runID()))
	return h.Sum(nil), nil
}

// keyedHoldout returns the positions among all its rows of the rows held
// out at a private site (selection.KeyedHoldout), nil when too few.
func (s *site) keyedHoldout() ([]int, error) {
	key, err := s.holdoutKey()
	if err != nil {
		return nil, err
	}
	return selection.KeyedHoldout(s.cfg.Data, s.share, key, s.cfg.minArmRows())
}

// noisedAnswers are the noised answers a private site gave to model
// selection's stages in a run, with a digest of each request.
type noisedAnswers struct {
	run     string
	answers map[int]noisedAnswer
}

type noisedAnswer struct {
	request [sha256.Size]byte
	tensors []wire.Tensor
}

// selectionRequest returns a digest of the tensors of e that say what a
// selection stage asks for (the stage, the DR flag, the candidates and
// their estimators), not the final weights, which it also carries.
func selectionRequest(e *wire.Envelope) [sha256.Size]byte {
	h := sha256.New()
	for _, t := range e.Tensors() {
		if !strings.HasPrefix(t.Name, "selection.") && !strings.HasPrefix(t.Name, "candidates.") && !strings.HasPrefix(t.Name, pCand) {
			continue
		}
		h.Write([]byte(t.Name))
		h.Write([]byte{0})
		for _, v := range t.Values {
			h.Write(binary.LittleEndian.AppendUint64(nil, math.Float64bits(v)))
		}
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// noisedOnce answers selection stage stage of e with answer, the first
// time the run asks it: each noised answer is charged once, so a stage
// asked again is answered with the same tensors (a resumed coordinator
// asks again), and one asked again for something else (other candidates,
// or the DR-learner's statistics when they were not asked for) is
// refused. Averaging fresh noise over repeated requests would undo it.
func (s *site) noisedOnce(e *wire.Envelope, stage int, answer func() ([]wire.Tensor, error)) ([]wire.Tensor, error) {
	if s.noised == nil || s.noised.run != e.RunID {
		s.noised = &noisedAnswers{run: e.RunID, answers: map[int]noisedAnswer{}}
	}
	req := selectionRequest(e)
	if a, ok := s.noised.answers[stage]; ok {
		if a.request != req {
			return nil, fmt.Errorf("%w: a private site answers each step of model selection once per run, and stage %d was asked again for something else", ErrLimit, stage)
		}
		return a.tensors, nil
	}
	ts, err := answer()
	if err != nil {
		return nil, err
	}
	s.noised.answers[stage] = noisedAnswer{request: req, tensors: ts}
	return ts, nil
}

// addNoise is the selection.AddNoise of the run's aggregate noise.
func (s *site) addNoise(v []float64, sensitivity float64) (float64, error) {
	if err := s.noiseAggregate(StepSelection, v, sensitivity); err != nil {
		return 0, err
	}
	return s.charge.aggregate(StepSelection) * sensitivity, nil
}

// privateStats answers stage 1 at a site that noises its selection.
func (s *site) privateStats(ctx context.Context, model *estimator.Model, dr bool) ([]wire.Tensor, error) {
	clip, err := selection.NewPrivateClip(model)
	if err != nil {
		return nil, err
	}
	train := s.kept
	if s.trainPos != nil {
		train = s.kept.Subset(s.trainPos)
	}
	st, err := selection.PrivateSiteStats(ctx, model, s.res.Index, train, dr, clip)
	if err != nil {
		return nil, err
	}
	if err := selection.NoiseStats(&st, clip, s.addNoise); err != nil {
		return nil, err
	}
	return append(statsTensors(st), wire.Vector(tStatsNoise, st.Noise[:])), nil
}

// privateLosses answers stage 2 at a site that noises its selection.
func (s *site) privateLosses(ctx context.Context, ests []selection.Estimator, models []*estimator.Model) (selection.SiteSums, error) {
	clip, err := selection.NewPrivateClip(s.res.Model)
	if err != nil {
		return selection.SiteSums{}, err
	}
	// ψ from nuisance models fitted from noised statistics (the same the
	// ATE uses): a row's ψ then depends on that row and a private release
	// alone, which cross-fitting on the site's rows would not give.
	nu, err := s.nuisance(ctx)
	if err != nil {
		return selection.SiteSums{}, fmt.Errorf("validation pseudo-outcomes: %w", err)
	}
	sums, err := selection.PrivateSiteLosses(ctx, nu, s.res.Index, s.kept, s.res.Held, ests, models, clip, 0)
	if err != nil {
		return selection.SiteSums{}, err
	}
	if err := sums.Noise(clip, s.addNoise); err != nil {
		return selection.SiteSums{}, err
	}
	return sums, nil
}

// lossNoiseTensor is what a private site adds to its losses answer.
func lossNoiseTensor(s selection.SiteSums) wire.Tensor {
	return wire.Vector(tLossNoise, []float64{s.Pairs.ResVar, s.Pairs.LossVar, s.Centre.ResVar, s.Centre.ResSqVar})
}

// noiseVariances reads the optional tensor name of n variances, each
// finite and non-negative; nil when e has none (an exact answer).
func noiseVariances(e *wire.Envelope, name string, n int) ([]float64, error) {
	if _, ok := e.Tensor(name); !ok {
		return nil, nil
	}
	v, err := vector(e, name, n)
	if err != nil {
		return nil, err
	}
	for _, x := range v {
		if !(x >= 0) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%w: %s tensor %q holds noise variance %v", ErrProtocol, e.Kind, name, x)
		}
	}
	return v, nil
}
