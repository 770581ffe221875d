package config

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/evaluate"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/pipeline"
	"github.com/crffd/crffd/plugins/kernels"
	"github.com/crffd/crffd/selection"
)

// EvalOptions are the flags of crffd eval, as given: each field holds
// the flag of its name (--source-size in SourceSize, --json in JSON), and
// Config the model's flags (--features, --rounds, …).
type EvalOptions struct {
	Data, Sources, Replicates, Seeds string // Sources, Replicates and Seeds are lists of numbers and ranges (1-3,5)
	Split                            []int
	Modes                            []string
	Epsilons                         []float64
	Delta, Clip, PsiClip             float64
	Bounds                           []string
	Exact                            []string
	CrossFit                         bool
	SourceSize, TestSource           int
	Kernel                           string
	KernelParams                     []string
	AutoKernels                      []string
	AutoEstimator                    string
	SelectionZ                       float64
	AutoBySite                       bool
	JSON                             bool
	Optimizer                        string
	Config                           estimator.Config
}

// DefaultEvalOptions are the defaults of crffd eval's flags.
func DefaultEvalOptions() EvalOptions {
	o := EvalOptions{
		Sources: "1,2,3", SourceSize: 249, Split: []int{50, 100, 99}, Modes: []string{"learned"},
		TestSource: 1, Kernel: "gaussian", Config: estimator.DefaultConfig(),
		AutoKernels: strings.Split(DefaultAutoKernels, ","), SelectionZ: selection.DefaultZ, AutoEstimator: "auto",
	}
	o.Optimizer = o.Config.Method.String()
	return o
}

// Plan returns the evaluation plan of o's flags but the kernels; seedSet
// says whether --seed was given.
func (o EvalOptions) Plan(seedSet bool) (evaluate.Plan, error) {
	var err error
	plan := evaluate.Plan{SourceSize: o.SourceSize, TestSource: o.TestSource, Config: o.Config, CrossFit: o.CrossFit}
	if err := CheckFolds(o.Config.Folds); err != nil {
		return plan, fmt.Errorf("--folds: %w", err)
	}
	switch o.Optimizer {
	case "lbfgs":
		plan.Config.Method = estimator.LBFGS
	case "adam":
		plan.Config.Method = estimator.Adam
	default:
		return plan, fmt.Errorf("--optimizer %q: want lbfgs or adam", o.Optimizer)
	}
	if plan.Sources, err = evaluate.ParseList(o.Sources); err != nil {
		return plan, fmt.Errorf("--sources: %w", err)
	}
	if len(o.Split) != 3 || slices.Min(o.Split) < 0 {
		return plan, fmt.Errorf("--split %s: want 3 non-negative numbers of rows, comma-separated", intList(o.Split))
	}
	copy(plan.Split[:], o.Split)
	for _, m := range o.Modes {
		plan.Modes = append(plan.Modes, strings.TrimSpace(m))
	}
	if err := o.privatePlan(&plan); err != nil {
		return plan, err
	}
	if o.Seeds != "" {
		if seedSet {
			return plan, errors.New("--seed and --seeds: give one of them")
		}
		if plan.Seeds, err = evaluate.ParseSeeds(o.Seeds); err != nil {
			return plan, fmt.Errorf("--seeds: %w", err)
		}
	}
	var sel []int
	if o.Replicates != "" {
		if sel, err = evaluate.ParseList(o.Replicates); err != nil {
			return plan, fmt.Errorf("--replicates: %w", err)
		}
	}
	plan.Replicates, err = evaluate.FindReplicates(o.Data, sel)
	return plan, err
}

// privatePlan sets the private runs of --epsilon in plan.
func (o EvalOptions) privatePlan(plan *evaluate.Plan) error {
	if len(o.Epsilons) == 0 {
		return nil
	}
	for _, v := range o.Epsilons {
		if !(v > 0) {
			return fmt.Errorf("--epsilon %v: want positive numbers or inf, comma-separated", o.Epsilons)
		}
	}
	plan.Epsilons = append(plan.Epsilons, o.Epsilons...)
	plan.Delta, plan.Clip, plan.PsiClip = o.Delta, o.Clip, o.PsiClip
	var err error
	if plan.Bounds, err = parseBounds(o.Bounds); err != nil {
		return err
	}
	plan.Exact = []string{federation.ExactRowCount}
	for _, e := range o.Exact {
		if e = strings.TrimSpace(e); e != "" && e != federation.ExactRowCount {
			plan.Exact = append(plan.Exact, e)
		}
	}
	return nil
}

// AutoPlan sets the auto mode's threshold and candidate kinds in plan.
func (o EvalOptions) AutoPlan(plan *evaluate.Plan) error {
	if o.SelectionZ < 0 {
		return fmt.Errorf("--selection-z %v: must not be negative", o.SelectionZ)
	}
	plan.SelectionZ, plan.AutoBySite = &o.SelectionZ, o.AutoBySite
	switch {
	case o.AutoEstimator == "auto":
	case slices.Contains(EstimatorNames, o.AutoEstimator):
		plan.AutoKinds = []string{o.AutoEstimator}
	default:
		return fmt.Errorf("--auto-estimator %q: want one of %s", o.AutoEstimator, strings.Join(EstimatorNames, ", "))
	}
	return nil
}

// DefaultAutoKernels are the kernels of crffd eval's auto mode: the
// installed kernels with these parameters: Gaussian, Laplacian and Matérn ν = ½, 3/2, 5/2.
const DefaultAutoKernels = "gaussian,laplacian,matern:nu=0.5,matern:nu=1.5,matern:nu=2.5"

// AutoKernel parses one item of a --auto-kernels list: NAME, then
// NAME=VALUE fields joined by ':', the grid point's (ParseGridPoint) and
// the kernel's parameters.
func AutoKernel(list []string, item string) (name string, grid selection.GridPoint, params kernels.Params, err error) {
	fields := strings.Split(strings.TrimSpace(item), ":")
	name = fields[0]
	grid, rest, err := ParseGridPoint(fields[1:])
	if err != nil {
		return "", grid, nil, fmt.Errorf("--auto-kernels %q: %w", item, err)
	}
	params, err = ParseKernelParams(rest)
	if err != nil || name == "" {
		return "", grid, nil, fmt.Errorf("--auto-kernels %q: %q is not NAME or NAME:PARAM=VALUE", strings.Join(list, ","), item)
	}
	return name, grid, params, nil
}

// OpenAutoKernels opens the kernels of a --auto-kernels list as model
// selection's candidates, each plugin once (by open), and returns what
// closes them.
func OpenAutoKernels(list []string, open func(name string) (*kernels.Client, error)) ([]selection.Kernel, func(), error) {
	clients := map[string]*kernels.Client{}
	closeAll := func() {
		for _, c := range clients {
			c.Close()
		}
	}
	var out []selection.Kernel
	for _, item := range list {
		name, grid, params, err := AutoKernel(list, item)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		c, ok := clients[name]
		if !ok {
			if c, err = open(name); err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("--auto-kernels: %w", err)
			}
			clients[name] = c
		}
		bound, err := c.WithParams(params)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("--auto-kernels %q: %w", item, err)
		}
		label := pipeline.KernelLabel(modelstore.Kernel{Name: name, Params: params, GridPoint: grid})
		out = append(out, selection.Kernel{Name: label, Spectral: bound, GridPoint: grid})
	}
	return out, closeAll, nil
}

// ParseKernelParams parses --kernel-param NAME=VALUE pairs.
func ParseKernelParams(pairs []string) (kernels.Params, error) {
	p := kernels.Params{}
	for _, kv := range pairs {
		name, val, ok := strings.Cut(kv, "=")
		v, err := strconv.ParseFloat(val, 64)
		if !ok || name == "" || err != nil {
			return nil, fmt.Errorf("--kernel-param %q: want NAME=NUMBER", kv)
		}
		p[name] = v
	}
	return p, nil
}

// intList writes v as a comma-separated list, as it was given.
func intList(v []int) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ",")
}

// parseBounds parses --bounds NAME=LO,HI flags.
func parseBounds(flags []string) (map[string]federation.Bound, error) {
	out := map[string]federation.Bound{}
	for _, f := range flags {
		name, r, ok := strings.Cut(f, "=")
		lo, hi, ok2 := strings.Cut(r, ",")
		var b federation.Bound
		var err error
		if ok && ok2 {
			if b.Lo, err = strconv.ParseFloat(strings.TrimSpace(lo), 64); err == nil {
				b.Hi, err = strconv.ParseFloat(strings.TrimSpace(hi), 64)
			}
		}
		if !ok || !ok2 || name == "" || err != nil || !(b.Lo < b.Hi) || math.IsInf(b.Lo, 0) || math.IsInf(b.Hi, 0) {
			return nil, fmt.Errorf("--bounds %q: want NAME=LO,HI with finite LO < HI", f)
		}
		out[strings.TrimSpace(name)] = b
	}
	return out, nil
}
