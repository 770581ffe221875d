package estimator

import (
	"errors"
	"fmt"

	"gonum.org/v1/gonum/mat"
)

// SiteWeights are what one site holds of one fitted model after training:
// its effective weights W_c^s by block name and the shared parameters.
type SiteWeights struct {
	Weights map[string]*mat.Dense
	Shared  map[string][]float64
}

// Own returns site s's part of t.
func (t *Trained) Own(s int) (SiteWeights, error) {
	if t == nil || s < 0 || s >= len(t.Weights) || t.Weights[s] == nil {
		return SiteWeights{}, fmt.Errorf("estimator: no weights of site %d", s)
	}
	return SiteWeights{Weights: t.Weights[s], Shared: t.Shared}, nil
}

// NewSiteModel rebuilds the model of site index site of a federation from
// its own weights alone, so that a site can score rows with exactly the
// model it was trained with, without the other sites' weights. Effects
// must then be called with the same site index: the effect samples of a
// row are keyed by it.
func NewSiteModel(setup *Setup, site int, own map[Kind]SiteWeights) (*Model, error) {
	if setup == nil {
		return nil, errors.New("estimator: nil setup")
	}
	if site < 0 {
		return nil, fmt.Errorf("estimator: site index %d", site)
	}
	m := &Model{Setup: setup}
	for _, k := range Kinds {
		sw, ok := own[k]
		if !ok {
			return nil, fmt.Errorf("estimator: no weights of the %v model", k)
		}
		for _, blk := range setup.Blocks(k) {
			w, ok := sw.Weights[blk.Name]
			if !ok {
				return nil, fmt.Errorf("estimator: %v model lacks weight block %q", k, blk.Name)
			}
			if r, c := w.Dims(); r != blk.Rows || c != blk.Cols {
				return nil, fmt.Errorf("estimator: %v weight block %q is %d×%d, want %d×%d", k, blk.Name, r, c, blk.Rows, blk.Cols)
			}
		}
		for _, p := range setup.SharedParams(k) {
			if v, ok := sw.Shared[p.Name]; !ok || len(v) != p.Size {
				return nil, fmt.Errorf("estimator: %v model lacks shared parameter %q of size %d", k, p.Name, p.Size)
			}
		}
		t := &Trained{Model: k, Weights: make([]map[string]*mat.Dense, site+1), Shared: sw.Shared}
		t.Weights[site] = sw.Weights
		switch k {
		case Propensity:
			m.Propensity = t
		case Outcome:
			m.Outcome = t
		case Latent:
			m.Latent = t
		}
	}
	return m, nil
}
