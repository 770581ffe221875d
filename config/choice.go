package config

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/pipeline"
	"github.com/crffd/crffd/selection"
)

// EstimatorNames are the values of model.estimator.
var EstimatorNames = []string{"auto", selection.KindLatent, selection.KindOutcome, selection.KindTLearner, selection.KindDR}

// Choice is what model.estimator, kernel.name, model.validation and
// model.selection_z ask for: the candidate kinds and kernels to choose
// among, and the share of rows held out to choose on. Reader.Choice
// leaves its Candidates and OnFitted unset.
type Choice = pipeline.Selection

// Choice reads model.estimator, model.validation and model.selection_z,
// then the kernels kernel.name asks for, from kernels (which, for auto,
// lists the installed kernel plugins), then kernel.grid, whose points are
// added as further candidates of the first kernel.
func (r Reader) Choice(kernels func() ([]modelstore.Kernel, error)) (Choice, error) {
	c := Choice{Share: r.V.GetFloat64("model.validation"), Z: r.V.GetFloat64("model.selection_z"), BySite: r.V.GetBool("model.selection_by_site")}
	switch est := r.V.GetString("model.estimator"); {
	case est == "auto":
	case slices.Contains(EstimatorNames, est):
		c.Kinds = []string{est}
	default:
		return c, fmt.Errorf("model.estimator %q: want one of %s", est, strings.Join(EstimatorNames, ", "))
	}
	if !(c.Share > 0 && c.Share < 1) {
		return c, fmt.Errorf("model.validation %v: want a share of the rows in (0, 1)", c.Share)
	}
	if !(c.Z >= 0) {
		return c, fmt.Errorf("model.selection_z %v: want a number of standard errors ≥ 0", c.Z)
	}
	var err error
	if c.Thresholds, err = r.PolicyThresholds(); err != nil {
		return c, err
	}
	if c.Kernels, err = kernels(); err != nil {
		return c, err
	}
	grid, err := r.Grid()
	for _, g := range grid {
		k := c.Kernels[0]
		k.GridPoint = g
		c.Kernels = append(c.Kernels, k)
	}
	return c, err
}

// MaxPolicyThresholds is the most thresholds site.policy_thresholds may
// list: each is a rule of crff_policy.
const MaxPolicyThresholds = 16

// PolicyThresholds reads site.policy_thresholds: distinct finite
// numbers, at most MaxPolicyThresholds.
func (r Reader) PolicyThresholds() ([]float64, error) {
	var out []float64
	for _, f := range r.StringList("site.policy_thresholds") {
		v, err := strconv.ParseFloat(f, 64)
		switch {
		case err != nil || math.IsNaN(v) || math.IsInf(v, 0):
			return nil, fmt.Errorf("site.policy_thresholds: %q is not a number", f)
		case slices.Contains(out, v):
			return nil, fmt.Errorf("site.policy_thresholds: %v listed twice", v)
		}
		out = append(out, v)
	}
	if len(out) > MaxPolicyThresholds {
		return nil, fmt.Errorf("site.policy_thresholds: %d thresholds, at most %d", len(out), MaxPolicyThresholds)
	}
	return out, nil
}

// Grid reads kernel.grid: points of D and γ, each NAME=VALUE fields
// joined by ':' (ParseGridPoint).
func (r Reader) Grid() ([]selection.GridPoint, error) {
	var out []selection.GridPoint
	for _, item := range r.StringList("kernel.grid") {
		var fields []string
		if strings.TrimSpace(item) != "" {
			fields = strings.Split(item, ":")
		}
		g, rest, err := ParseGridPoint(fields)
		switch {
		case err != nil:
			return nil, fmt.Errorf("kernel.grid %q: %w", item, err)
		case len(rest) > 0:
			return nil, fmt.Errorf("kernel.grid %q: %q is not features=N, linear=G or transfer=T", item, rest[0])
		case g == selection.GridPoint{}:
			return nil, fmt.Errorf("kernel.grid %q: a point sets features=N, linear=G, transfer=T or several", item)
		}
		out = append(out, g)
	}
	return out, nil
}

// ParseGridPoint takes the grid settings features=N, linear=G and
// transfer=T (learned, none or full) out of
// the NAME=VALUE fields of a kernel item and returns them, and the other
// fields, the kernel's own parameters.
func ParseGridPoint(fields []string) (selection.GridPoint, []string, error) {
	var k selection.GridPoint
	var rest []string
	for _, f := range fields {
		name, val, _ := strings.Cut(f, "=")
		switch name {
		case "features":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 {
				return k, nil, fmt.Errorf("features=%q: want a whole number of random frequencies ≥ 1", val)
			}
			k.Features = n
		case "linear":
			g, err := strconv.ParseFloat(val, 64)
			if err != nil || !(g >= 0) || math.IsInf(g, 0) {
				return k, nil, fmt.Errorf("linear=%q: want a weight γ ≥ 0", val)
			}
			k.Linear = &g
		case "transfer":
			if _, err := estimator.ParseTransfer(val); err != nil {
				return k, nil, fmt.Errorf("transfer=%q: want learned, none or full", val)
			}
			k.Transfer = val
		default:
			rest = append(rest, f)
		}
	}
	return k, rest, nil
}

// FederatedSelection is the model selection the coordinator asks of a
// run from the choice c of model.estimator, model.validation,
// model.selection_z and kernel.name: none for the latent CATE of one
// kernel alone, and otherwise the candidates of c's kinds, chosen on the
// held-out share of each site's rows. Its kernel is c's first (the
// Gaussian, with kernel.name auto); c's others are the run's further
// kernels (federation.CoordinatorConfig.Extra), whose models every site
// trains too.
func FederatedSelection(c Choice) (federation.Selection, error) {
	for _, k := range c.Kernels {
		if k.GridPoint != (selection.GridPoint{Transfer: k.Transfer}) {
			return federation.Selection{}, errors.New("kernel.grid points of features or linear run in crffd fit only: a federation trains every kernel with the run's model.features and model.linear (transfer=T runs in both)")
		}
	}
	if len(c.Kernels) == 1 && len(c.Kinds) == 1 && c.Kinds[0] == selection.KindLatent {
		return federation.Selection{}, nil
	}
	return federation.Selection{Share: c.Share, Kinds: c.Kinds, Z: c.Z, BySite: c.BySite, Kernel: pipeline.KernelLabel(c.Kernels[0])}, nil
}
