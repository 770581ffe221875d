package federation

import (
	"context"
	"fmt"
	"math"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/selection"
)

// final takes the final weights: with a selection stage of 1 or 2 it
// answers model selection's stats or losses, and otherwise it scores every
// row and answers the local ATE.
func (s *site) final(ctx context.Context, e *wire.Envelope) ([]*wire.Envelope, error) {
	if s.train == nil {
		return nil, fmt.Errorf("%w: final weights before the dedup-verdict", ErrProtocol)
	}
	s.train.Release()
	s.trained("")
	model, err := s.finalModel(e)
	if err != nil {
		return nil, err
	}
	stage := 0
	if _, ok := e.Tensor(tSelectStage); ok {
		if stage, err = integer(e, tSelectStage); err != nil {
			return nil, err
		}
	}
	if stage > 0 && s.share == 0 {
		return nil, fmt.Errorf("%w: model selection (stage %d) in a run that selects no model", ErrProtocol, stage)
	}
	switch stage {
	case 0:
		if s.share > 0 {
			return nil, fmt.Errorf("%w: final weights without the model selection of a run that selects a model", ErrProtocol)
		}
		return s.score(ctx, e, model, nil)
	case 1:
		return s.stats(ctx, e, model)
	case 2:
		return s.losses(ctx, e)
	case 3:
		sel, err := s.choice(e)
		if err != nil {
			return nil, err
		}
		return s.score(ctx, e, model, sel)
	}
	return nil, fmt.Errorf("%w: unknown model selection stage %d", ErrProtocol, stage)
}

// finalModel builds the site's model of every kernel of the run from the
// final weights in e, and returns the run's own kernel's.
func (s *site) finalModel(e *wire.Envelope) (*estimator.Model, error) {
	models := make([]*estimator.Model, len(s.setups))
	for k, setup := range s.setups {
		own := map[estimator.Kind]estimator.SiteWeights{}
		for _, kind := range estimator.Kinds {
			p := modelName(kind, k) + "."
			w, err := matrices(e, p+pWeights)
			if err != nil {
				return nil, err
			}
			sh := vectors(e, p+pShared)
			if err := checkBlocks(setup, kind, w, sh); err != nil {
				return nil, err
			}
			own[kind] = estimator.SiteWeights{Weights: w, Shared: sh}
			if k > 0 {
				continue // Λ and the rounds published are the run's kernel's
			}
			if s.res.Lambda[kind], err = vector(e, p+tLambda, s.res.Sites); err != nil {
				return nil, err
			}
			if s.res.Rounds[kind], err = integer(e, p+tRounds); err != nil {
				return nil, err
			}
		}
		var err error
		if models[k], err = estimator.NewSiteModel(setup, s.res.Index, own); err != nil {
			return nil, err
		}
	}
	s.res.Model, s.res.Models = models[0], models
	return models[0], nil
}

// score scores every row by the chosen estimator of sel (nil: the latent
// CATE) and answers the local ATE.
func (s *site) score(ctx context.Context, e *wire.Envelope, model *estimator.Model, sel *SiteSelection) ([]*wire.Envelope, error) {
	eff, err := model.Effects(ctx, s.res.Index, s.cfg.Data)
	if err != nil {
		return nil, err
	}
	s.res.Effects, s.res.CATE, s.res.Selection = eff, eff.CATE, sel
	if sel != nil {
		models := s.res.Models
		if sel.Estimator.Kind != selection.KindEnsemble {
			models = models[:1] // choice refuses another kernel's
		}
		own, err := s.localise(ctx, sel.Estimator)
		if err != nil {
			return nil, err
		}
		sel.Estimator = own[0]
		if s.res.CATE, err = sel.Estimator.CATEModels(ctx, models, s.res.Index, s.cfg.Data, eff.CATE); err != nil {
			return nil, err
		}
	}
	cate := make([]float64, len(s.res.Kept))
	for i, k := range s.res.Kept {
		cate[i] = s.res.CATE[k]
	}
	if s.res.Local.PlugIn, err = inference.PlugIn(cate); err != nil {
		return nil, err
	}
	// The nuisances of the AIPW estimate, and of the calibration of the
	// CATEs, are cross-fitted on the site's own kept rows: no rounds, and
	// nothing leaves but the three sums.
	nu, err := s.nuisance(ctx)
	if err != nil {
		return nil, err
	}
	an, err := inference.Analyse(s.kept.W, s.kept.Y, nu, cate, s.kept.X)
	if err != nil {
		return nil, err
	}
	sums := an.Sums
	s.res.Local.AIPW, s.res.Local.Clipped, s.res.Calibration, s.res.Stack = an.AIPW, an.Clipped, an.Calibration, an.Stack
	s.res.Scores, s.res.ScoreClipped = make([]float64, len(s.res.CATE)), make([]bool, len(s.res.CATE))
	s.res.Control = make([]float64, len(s.res.CATE))
	for i := range s.res.Scores {
		s.res.Scores[i], s.res.Control[i] = math.NaN(), math.NaN()
	}
	for j, k := range s.res.Kept {
		s.res.Scores[k], s.res.ScoreClipped[k], s.res.Control[k] = an.Scores[j], an.ClippedRows[j], an.Control[j]
	}
	ts, err := s.ateTensors(s.res.Local.PlugIn.Estimate, sums, s.res.Local.Clipped, an.Scores, cate)
	if err != nil {
		return nil, err
	}
	gs, err := decodeSubgroups(e)
	if err != nil {
		return nil, err
	}
	gates, err := s.gateTensors(ctx, gs, an.Scores, s.kept.W, cate)
	if err != nil {
		return nil, err
	}
	ts = append(ts, gates...)
	// The tests of heterogeneity are a by-product: a site that cannot
	// compute its sums sends none, and the run pools none.
	het, err := s.hetTensors(an.Scores, an.Control, cate)
	if err != nil {
		// The error may quote a row's score: the log says only that.
		s.log.Warn("heterogeneity sums not sent: package heterogeneity refused the held-out rows' scores or estimates")
		het = nil
	}
	ts = append(ts, het...)
	a, err := s.reply(e, wire.KindATE, ts)
	if err != nil {
		return nil, err
	}
	return []*wire.Envelope{a}, nil
}

// global takes the global ATE, publishes the results and confirms with done.
func (s *site) global(ctx context.Context, e *wire.Envelope) ([]*wire.Envelope, error) {
	if s.res == nil || s.res.Effects == nil {
		return nil, fmt.Errorf("%w: global-ate before the final weights", ErrProtocol)
	}
	g, err := decodeGlobal(e)
	if err != nil {
		return nil, err
	}
	s.res.Global = g
	s.res.Private = s.cfg.Privacy != nil
	if p, err := integer(e, tPrivateSites); err == nil {
		s.res.PrivateSites = p
	}
	if s.res.Balance, err = globalBalance(e, len(s.cfg.Schema.Binary)); err != nil {
		return nil, err
	}
	if s.res.GlobalGATE, err = decodeGlobalGATEs(e, s.res.Subgroups, s.res.Sites); err != nil {
		return nil, err
	}
	if s.res.GlobalHeterogeneity, err = decodeGlobalHet(e, g.AIPW.N); err != nil {
		return nil, err
	}
	if s.cfg.Publish != nil {
		if err := s.cfg.Publish(ctx, s.res); err != nil {
			return nil, fmt.Errorf("publish results: %w", err)
		}
	}
	d, err := s.reply(e, wire.KindDone, []wire.Tensor{wire.Scalar(tStatus, 1)})
	if err != nil {
		return nil, err
	}
	return []*wire.Envelope{d}, nil
}

// nuisance returns the nuisances of the kept rows, computed once per run:
// the held-out losses of model selection and the AIPW ATE use the same
// ones. They are cross-fitted on those rows by the super learner
// (estimator.CrossFit); at a site that releases its ATE's sums with noise
// they are fitted from the rows' sufficient statistics released to the
// site itself with noise (fitPrivateNuisance). Σψ of a private site has
// sensitivity B only if each row's ψ depends on that row and on private
// releases alone; cross-fitting breaks that, since every row trains the
// fold models (and moves the stack's weights) that predict the others.
func (s *site) nuisance(ctx context.Context) (inference.Nuisance, error) {
	if s.nu != nil {
		return *s.nu, nil
	}
	var nu inference.Nuisance
	var err error
	switch {
	case s.privateNuisance() && s.charge.aggregate(StepNuisance) == 0:
		// Too few rows for the noise (calibrateNuisance): the run's
		// DP-trained models, whose predictions are post-processing.
		nu, err = s.res.Model.Nuisance(s.res.Index, s.kept)
	case s.privateNuisance():
		nu, err = fitPrivateNuisance(s.cfg.Privacy, s.res.Setup, s.kept, s.charge.aggregate(StepNuisance), s.noiseFor(StepNuisance))
	default:
		// No model trained on a held-out row: the same nuisances give the
		// training rows' pseudo-outcomes (trainingPseudoOutcomes), the
		// held-out rows' and the AIPW's.
		nu, err = estimator.CrossFitExcept(ctx, s.res.Setup, s.res.Index, s.kept, s.res.Held)
	}
	if err != nil {
		return inference.Nuisance{}, err
	}
	s.nu = &nu
	return nu, nil
}
