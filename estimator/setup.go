package estimator

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Scaler holds the pooled standardisation every site applies to its rows.
// It is made from the sites' Moments, so only shared scalars are used.
type Scaler struct {
	Mean  []float64 // per covariate; 0 for binary covariates
	Scale []float64 // per covariate; 1 for binary covariates
	YMean float64   // pooled outcome mean (0 for a binary outcome)
	YSD   float64   // pooled outcome standard deviation (1 for a binary outcome)

	// Pooled mean and standard deviation of log y, set when every row of
	// a continuous outcome is positive (LogYValid).
	LogYMean, LogYSD float64
	LogYValid        bool
	// LogYPreferred reports that the Box–Cox profile likelihood of the
	// pooled outcomes is higher for log y (λ = 0) than for y (λ = 1):
	//
	//	−(n/2)·log Var(log y) − Σ log y  >  −(n/2)·log Var(y).
	//
	// It is what Config.LogOutcome = LogAuto decides by.
	LogYPreferred bool
}

// NewScaler pools the sites' Moments. Continuous covariates get the pooled
// mean and standard deviation; a constant column keeps scale 1 so that it
// cannot divide by zero.
func NewScaler(schema Schema, moments []Moments) (Scaler, error) {
	dx := len(schema.Binary)
	s := Scaler{Mean: make([]float64, dx), Scale: make([]float64, dx), YSD: 1}
	var n, pos, lsum, lsumsq float64
	sum := make([]float64, dx+1)
	sumsq := make([]float64, dx+1)
	for _, m := range moments {
		if len(m.Sum) != dx+1 || len(m.SumSq) != dx+1 {
			return Scaler{}, fmt.Errorf("estimator: moments of %d columns, want %d", len(m.Sum), dx+1)
		}
		n += float64(m.N)
		pos += float64(m.Positive)
		lsum += m.LogSum
		lsumsq += m.LogSumSq
		for j := range sum {
			sum[j] += m.Sum[j]
			sumsq[j] += m.SumSq[j]
		}
	}
	if n < 2 {
		return Scaler{}, errors.New("estimator: standardisation needs at least two rows")
	}
	meanSD := func(j int) (float64, float64) {
		mean := sum[j] / n
		v := (sumsq[j] - n*mean*mean) / (n - 1)
		if !(v > 1e-12) {
			return mean, 1
		}
		return mean, math.Sqrt(v)
	}
	for j := range dx {
		s.Scale[j] = 1
		if !schema.Binary[j] {
			s.Mean[j], s.Scale[j] = meanSD(j)
		}
	}
	if !schema.BinaryOutcome {
		s.YMean, s.YSD = meanSD(dx)
		lmean := lsum / n
		lvar := (lsumsq - n*lmean*lmean) / (n - 1)
		if pos == n && lvar > 1e-12 && s.YSD > 1e-6 {
			s.LogYValid = true
			s.LogYMean, s.LogYSD = lmean, math.Sqrt(lvar)
			s.LogYPreferred = -0.5*n*math.Log(lvar)-lsum > -0.5*n*math.Log(s.YSD*s.YSD)
		}
	}
	return s, nil
}

// Feature maps of a model, indexing Setup.Maps.
const (
	mapPropensity = iota
	mapOutcome
	mapEncoder
	mapDecoder
	numMaps
)

// Setup is what every participant of a federation must agree on before
// training: the schema, the configuration, the pooled standardisation and
// the base frequencies of the four feature maps. A coordinator sends it (or
// the seed and moments it derives from) to every site.
type Setup struct {
	Schema Schema
	Config Config
	Scaler Scaler
	// Maps are the feature maps of the propensity (on x), the outcome (on x),
	// the encoder (on [x, y], or on x alone for a binary outcome; see
	// EncodesOutcome) and the decoder (on z), in that order.
	Maps [numMaps]FeatureMap
}

// NewSetup validates cfg and draws the base frequencies of the four feature
// maps from spectral, map k with seed mix(Seed, k).
func NewSetup(ctx context.Context, schema Schema, spectral Spectral, cfg Config, scaler Scaler) (*Setup, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	dx := len(schema.Binary)
	if dx == 0 {
		return nil, errors.New("estimator: schema has no covariates")
	}
	if len(scaler.Mean) != dx || len(scaler.Scale) != dx {
		return nil, errors.New("estimator: scaler does not match the schema")
	}
	if spectral == nil {
		return nil, errors.New("estimator: nil spectral sampler")
	}
	s := &Setup{Schema: schema, Config: cfg, Scaler: scaler}
	dims := [numMaps]int{dx, dx, s.encoderIn(), cfg.Latent}
	for k, d := range dims {
		om, err := spectral.Sample(ctx, d, cfg.Features, mix(cfg.Seed, uint64(k)))
		if err != nil {
			return nil, fmt.Errorf("estimator: sampling frequencies: %w", err)
		}
		if r, c := om.Dims(); r != d || c != cfg.Features {
			return nil, fmt.Errorf("estimator: spectral sample is %d×%d, want %d×%d", r, c, d, cfg.Features)
		}
		s.Maps[k] = FeatureMap{Omega0: om, Linear: cfg.Linear}
	}
	return s, nil
}

// EncodesOutcome reports whether the latent model's encoder reads the
// outcome and the treatment, q(z|x,y,w) with one weight block per arm as in
// the paper, or, for a binary outcome, x alone: q(z|x) with one block. See
// the package documentation's departures for why.
func (s *Setup) EncodesOutcome() bool { return !s.Schema.BinaryOutcome }

// encoderIn is the input dimension of the encoder: dx + 1 for [x, y], dx
// for x alone.
func (s *Setup) encoderIn() int {
	dx := len(s.Schema.Binary)
	if s.EncodesOutcome() {
		return dx + 1
	}
	return dx
}

// checkOutcomes refuses rows whose outcome the models cannot take: a
// non-positive outcome when the models are fitted to log y (the setup was
// agreed on other rows, all positive).
func (s *Setup) checkOutcomes(d *Data) error {
	if !s.LogY() {
		return nil
	}
	for i, y := range d.Y {
		if y <= 0 {
			return fmt.Errorf("estimator: row %d: outcome %v is not positive, but the models are fitted to log y", i, y)
		}
	}
	return nil
}

// LogY reports whether the models are fitted to log y: the outcome is
// continuous and positive, and Config.LogOutcome is LogAlways, or LogAuto
// and the Box–Cox criterion of the Scaler prefers log y.
func (s *Setup) LogY() bool {
	if s.Schema.BinaryOutcome || !s.Scaler.LogYValid {
		return false
	}
	switch s.Config.LogOutcome {
	case LogAlways:
		return true
	case LogAuto:
		return s.Scaler.LogYPreferred
	}
	return false
}

// yLoc returns the centre and scale of the model units of a continuous
// outcome: its (log-)outcome is standardised as (v − centre)/scale.
func (s *Setup) yLoc() (centre, scale float64) {
	switch {
	case s.Schema.BinaryOutcome || !s.Config.StandardizeY:
		return 0, 1
	case s.LogY():
		return s.Scaler.LogYMean, s.Scaler.LogYSD
	}
	return s.Scaler.YMean, s.Scaler.YSD
}

// yToModel maps an outcome to the units the models are fitted in.
func (s *Setup) yToModel(y float64) float64 {
	if s.Schema.BinaryOutcome {
		return y
	}
	if s.LogY() {
		y = math.Log(y)
	}
	c, sc := s.yLoc()
	return (y - c) / sc
}

// yMean maps a model's output v for the outcome to the mean of the
// outcome in its own units. For a binary outcome v is a logit and the mean
// is the probability σ(v). Otherwise v is the mean of a Gaussian in model
// units with standard deviation sd; for a log outcome the mean is
// exp(m + s²/2), with m and s the log-scale mean and standard deviation:
// the log-normal mean, not the median exp(m), which would bias every
// effect low by the factor exp(−s²/2).
func (s *Setup) yMean(v, sd float64) float64 {
	if s.Schema.BinaryOutcome {
		return sigmoid(v)
	}
	c, sc := s.yLoc()
	v = c + sc*v
	if s.LogY() {
		return math.Exp(v + 0.5*sc*sc*sd*sd)
	}
	return v
}

// yScale is the factor from model units to the units of the (log-)outcome
// before standardisation.
func (s *Setup) yScale() float64 {
	_, sc := s.yLoc()
	return sc
}

// yRawSD is the pooled standard deviation of the (log-)outcome.
func (s *Setup) yRawSD() float64 {
	if s.LogY() {
		return s.Scaler.LogYSD
	}
	return s.Scaler.YSD
}

// initLogScale is the initial a of a map on inputs of dimension d: the
// median-distance heuristic puts the lengthscale near √d for standardised
// inputs, that is a = −½·log d.
func (s *Setup) initLogScale(d int) float64 {
	if s.Config.InitLogScale != 0 {
		return s.Config.InitLogScale
	}
	return -0.5 * math.Log(float64(d))
}
