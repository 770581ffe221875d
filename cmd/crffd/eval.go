package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/config"
	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/evaluate"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/plugins/kernels"
	"github.com/crffd/crffd/progress"
	"github.com/crffd/crffd/selection"
)

// evalOptions are the flags of crffd eval.
type evalOptions struct {
	data, sources, split, replicates, modes string
	seeds                                   string
	epsilons                                string
	delta, clip, psiClip                    float64
	bounds                                  []string
	exact                                   string
	crossFit                                bool
	sourceSize, testSource                  int
	kernel                                  string
	kernelParams                            []string
	autoKernels, autoEstimator              string
	selectionZ                              float64
	jsonOut                                 bool
	optimizer                               string
	cfg                                     estimator.Config
}

func newEvalCmd(a *app) *cobra.Command {
	o := evalOptions{
		sources: "1,2,3", sourceSize: 249, split: "50,100,99", modes: "learned",
		testSource: 1, kernel: "gaussian", cfg: estimator.DefaultConfig(),
		autoKernels: defaultAutoKernels, selectionZ: selection.DefaultZ, autoEstimator: "auto",
	}
	o.optimizer = o.cfg.Method.String()
	cmd := &cobra.Command{
		Use:   "eval --data PATH",
		Short: "Reproduce the paper's benchmark tables on IHDP-layout CSV files",
		Long: `eval fits CausalRFF (and baselines) on IHDP-layout CSV files, one file per
replicate, with the sources as equal consecutive blocks of --source-size rows and
each source split in order into --split TRAIN,TEST,VAL rows. For every replicate,
mode and number k of sources it trains on the training rows of the first k
sources and reports sqrt(PEHE) and the ATE error on the test rows of
--test-source. It prints mean ± standard error per mode and source count, or
every run and the summary as JSON with --json.

Beside the plug-in ATE (the mean CATE; ATE ERROR is its mean absolute error and
ATE BIAS its mean signed error against the mean of mu1 - mu0 over the test rows)
it reports the doubly robust AIPW estimate on the same test rows, from the
propensity and outcome models fitted on the training rows: AIPW ERROR (mean
absolute error), AIPW BIAS (mean signed error), AIPW COVERAGE (the share of runs
whose 95% interval holds the true ATE of the test rows) and AIPW WIDTH (the mean
width of that interval). DR SQRT(PEHE) is that of the DR-calibrated CATE: the
mode's CATE plus a ridge regression, on [1, x], of the test rows' doubly robust
pseudo-outcomes minus that CATE; CATE COVERAGE is the mean share of test rows
whose 95% interval of the calibrated CATE holds mu1 - mu0, CATE WIDTH its mean
width. With --crossfit the nuisances of these figures are cross-fitted on the test
rows themselves (model.folds folds), which is what crffd fit and a site daemon do
with a site's rows.

Modes: learned (CausalRFF), none (each site alone), full (pooled), tlearner
(per-arm ridge regression on the same random features, pooled), and auto: model
selection on the validation rows of every source (never the test rows). auto
fits learned CausalRFF with each kernel of --auto-kernels and scores, by the
doubly robust loss with nuisances cross-fitted on each source's training and
validation rows, each kernel's latent CATE and outcome-model CATE, and the
T-learner and DR-learner on the first kernel's outcome features with ridge
penalties 1, 10 and 100. It reports their ensemble: the mean CATE of the
candidates within --selection-z standard errors of the paired loss difference
from the best, shifted towards each source's doubly robust ATE (README,
"Choosing the estimator and the kernel on held-out rows"). --auto-estimator
keeps one kind of candidate, as model.estimator does (latent: choose the
kernel alone). --json lists every candidate's validation loss
and, for the record, its test-row errors.

--data ihdp reads the ten IHDP replicates embedded in crffd (Hill 2011, as
published with CEVAE); write ./ihdp for a folder of that name.`,
		Example: `  # the paper's IHDP table, shipped with crffd
  crffd eval --data ihdp --source-size 249 --split 50,100,99 --replicates 1-10 --sources 1,2,3 --modes auto,learned,tlearner

  # a design of crffd simulate, ten replicates of one source of 1000 rows
  crffd simulate --design linear-varying --sources 1 --rows 1000 --replicates 10 --out syn/
  crffd eval --data syn/ --source-size 1000 --split 500,250,250 --sources 1 --modes auto,learned,tlearner`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEval(cmd, a, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.data, "data", "", "a CSV file or a directory of CSV files (one per replicate)")
	f.StringVar(&o.sources, "sources", o.sources, "numbers of training sources to compare, e.g. 1,2,3")
	f.IntVar(&o.sourceSize, "source-size", o.sourceSize, "rows per source")
	f.StringVar(&o.split, "split", o.split, "training, test and validation rows per source")
	f.StringVar(&o.replicates, "replicates", "", "replicates to run, e.g. 1-10 (default: every file)")
	f.StringVar(&o.modes, "modes", o.modes, "comma-separated: learned, none, full, tlearner, auto")
	f.StringVar(&o.autoKernels, "auto-kernels", o.autoKernels, "kernels of the auto mode's candidates, the first the reference: NAME or NAME:PARAM=VALUE, comma-separated; features=N and linear=G set a kernel's own D and γ (a grid point: gaussian:features=100:linear=0)")
	f.StringVar(&o.autoEstimator, "auto-estimator", o.autoEstimator, "the auto mode's candidate kinds, as model.estimator: auto (all), latent, outcome, tlearner or dr")
	f.Float64Var(&o.selectionZ, "selection-z", o.selectionZ, "standard errors of the paired loss difference from the best within which an auto candidate joins the ensemble")
	f.IntVar(&o.testSource, "test-source", o.testSource, "source whose test rows are scored")
	f.StringVar(&o.kernel, "kernel", o.kernel, "kernel plugin name")
	f.StringArrayVar(&o.kernelParams, "kernel-param", nil, "kernel parameter NAME=VALUE, e.g. nu=2.5 (repeatable)")
	f.BoolVar(&o.jsonOut, "json", false, "print every run and the summary as JSON")
	f.IntVar(&o.cfg.Features, "features", o.cfg.Features, "random frequencies D per feature map")
	f.IntVar(&o.cfg.Latent, "latent", o.cfg.Latent, "latent dimension dz")
	f.IntVar(&o.cfg.Rounds, "rounds", o.cfg.Rounds, "maximum federated rounds per model")
	f.StringVar(&o.optimizer, "optimizer", o.optimizer, "lbfgs or adam")
	f.Float64Var(&o.cfg.LearningRate, "learning-rate", o.cfg.LearningRate, "Adam step size")
	f.Float64Var(&o.cfg.TransferPrior, "transfer-prior", o.cfg.TransferPrior, "κ of a Beta(1+κ,1) prior on every learned λ")
	f.IntVar(&o.cfg.Samples, "samples", o.cfg.Samples, "effect samples per row")
	f.IntVar(&o.cfg.MHSteps, "mh-steps", o.cfg.MHSteps, "Metropolis–Hastings steps per sample (0: sample z from q)")
	f.Uint64Var(&o.cfg.Seed, "seed", o.cfg.Seed, "seed of frequencies, initial weights and sampling")
	f.StringVar(&o.seeds, "seeds", "", "repeat every run with each of these seeds, e.g. 0-4, and average them per replicate (instead of --seed)")
	f.IntVar(&o.cfg.Folds, "folds", o.cfg.Folds, "folds over which --crossfit cross-fits the nuisances")
	f.StringVar(&o.epsilons, "epsilon", "", "run each transfer mode at each differential-privacy ε, e.g. 1,4,16,inf (every source private; inf: exact); needs --optimizer adam")
	f.Float64Var(&o.delta, "delta", 1e-5, "δ of the --epsilon runs")
	f.Float64Var(&o.clip, "clip", 1, "per-row gradient clip norm of the --epsilon runs")
	f.StringArrayVar(&o.bounds, "bounds", nil, "public range of a continuous column in the --epsilon runs, NAME=LO,HI (x1, x2, …, and y for the outcome; repeatable), as privacy.bounds")
	f.Float64Var(&o.psiClip, "psi-clip", 0, "the --epsilon runs' clip bound of the AIPW scores, as privacy.psi_clip (0: 2 × the outcome's width)")
	f.StringVar(&o.exact, "exact", "", "aggregates the --epsilon runs' sources release exactly, as privacy.exact (row_count is always)")
	f.BoolVar(&o.crossFit, "crossfit", false, "cross-fit the AIPW nuisances on the scored rows, as crffd fit does, instead of taking them from the training fit")
	_ = cmd.MarkFlagRequired("data")
	return cmd
}

// parseKernelParams parses NAME=VALUE pairs.
func parseKernelParams(pairs []string) (kernels.Params, error) {
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

func runEval(cmd *cobra.Command, a *app, o evalOptions) error {
	plan, err := o.plan(cmd.Flags().Changed("seed"))
	if err != nil {
		return err
	}
	params, err := parseKernelParams(o.kernelParams)
	if err != nil {
		return err
	}
	dir, err := a.pluginDir()
	if err != nil {
		return err
	}
	kernel, err := a.openKernel(cmd, dir, o.kernel, params)
	if err != nil {
		return err
	}
	defer kernel.Close()
	plan.Spectral = kernel
	if slices.Contains(plan.Modes, "auto") {
		closeAll, err := a.openAutoKernels(cmd, dir, o.autoKernels, &plan)
		if err != nil {
			return err
		}
		defer closeAll()
		if err := o.autoPlan(&plan); err != nil {
			return err
		}
	}
	bar := progress.New(os.Stderr, a.log)
	plan.Progress = func(done, total int, r evaluate.Result) { a.evalProgress(bar, done, total, r) }
	rep, err := evaluate.Run(cmd.Context(), plan)
	bar.Done()
	if err != nil {
		return err
	}
	if o.jsonOut {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(a.stdout, "%d replicates from %s; test rows of source %d; split %s; kernel %s %s\n",
		len(plan.Replicates), o.data, o.testSource, o.split, o.kernel, kernel.Params())
	if o.seeds != "" {
		fmt.Fprintf(a.stdout, "seeds %s: each replicate's runs averaged over the seeds, standard errors over replicates\n", o.seeds)
	}
	fmt.Fprintln(a.stdout)
	return rep.WriteText(a.stdout)
}

// plan returns the evaluation plan of o's flags but the kernels; seedSet
// says whether --seed was given.
func (o evalOptions) plan(seedSet bool) (evaluate.Plan, error) {
	var err error
	plan := evaluate.Plan{SourceSize: o.sourceSize, TestSource: o.testSource, Config: o.cfg, CrossFit: o.crossFit}
	if err := config.CheckFolds(o.cfg.Folds); err != nil {
		return plan, fmt.Errorf("--folds: %w", err)
	}
	switch o.optimizer {
	case "lbfgs":
		plan.Config.Method = estimator.LBFGS
	case "adam":
		plan.Config.Method = estimator.Adam
	default:
		return plan, fmt.Errorf("--optimizer %q: want lbfgs or adam", o.optimizer)
	}
	if plan.Sources, err = evaluate.ParseList(o.sources); err != nil {
		return plan, fmt.Errorf("--sources: %w", err)
	}
	split, err := parseInts(o.split, 3, "--split")
	if err != nil {
		return plan, err
	}
	copy(plan.Split[:], split)
	for _, m := range strings.Split(o.modes, ",") {
		plan.Modes = append(plan.Modes, strings.TrimSpace(m))
	}
	if err := o.privatePlan(&plan); err != nil {
		return plan, err
	}
	if o.seeds != "" {
		if seedSet {
			return plan, errors.New("--seed and --seeds: give one of them")
		}
		if plan.Seeds, err = evaluate.ParseSeeds(o.seeds); err != nil {
			return plan, fmt.Errorf("--seeds: %w", err)
		}
	}
	var sel []int
	if o.replicates != "" {
		if sel, err = evaluate.ParseList(o.replicates); err != nil {
			return plan, fmt.Errorf("--replicates: %w", err)
		}
	}
	plan.Replicates, err = evaluate.FindReplicates(o.data, sel)
	return plan, err
}

// privatePlan sets the private runs of --epsilon in plan.
func (o evalOptions) privatePlan(plan *evaluate.Plan) error {
	if o.epsilons == "" {
		return nil
	}
	for _, e := range strings.Split(o.epsilons, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(e), 64)
		if err != nil || !(v > 0) {
			return fmt.Errorf("--epsilon %q: want positive numbers or inf, comma-separated", o.epsilons)
		}
		plan.Epsilons = append(plan.Epsilons, v)
	}
	plan.Delta, plan.Clip, plan.PsiClip = o.delta, o.clip, o.psiClip
	var err error
	if plan.Bounds, err = parseBounds(o.bounds); err != nil {
		return err
	}
	plan.Exact = []string{federation.ExactRowCount}
	for _, e := range strings.Split(o.exact, ",") {
		if e = strings.TrimSpace(e); e != "" && e != federation.ExactRowCount {
			plan.Exact = append(plan.Exact, e)
		}
	}
	return nil
}

// autoPlan sets the auto mode's threshold and candidate kinds in plan.
func (o evalOptions) autoPlan(plan *evaluate.Plan) error {
	if o.selectionZ < 0 {
		return fmt.Errorf("--selection-z %v: must not be negative", o.selectionZ)
	}
	plan.SelectionZ = &o.selectionZ
	switch {
	case o.autoEstimator == "auto":
	case slices.Contains(config.EstimatorNames, o.autoEstimator):
		plan.AutoKinds = []string{o.autoEstimator}
	default:
		return fmt.Errorf("--auto-estimator %q: want one of %s", o.autoEstimator, strings.Join(config.EstimatorNames, ", "))
	}
	return nil
}

// evalProgress shows the progress of crffd eval after run r.
func (a *app) evalProgress(bar *progress.Line, done, total int, r evaluate.Result) {
	bar.Update("eval", done, total, fmt.Sprintf("runs (last: replicate %d, %s, %d sources, seed %d, sqrt(PEHE) %.3f)", r.Replicate, r.Mode, r.Sources, r.Seed, r.SqrtPEHE))
	a.log.Debug("eval run", slog.Int(logKeyDone, done), slog.Int(logKeyTotal, total),
		slog.Int(logKeyReplicate, r.Replicate), slog.String(logKeyMode, r.Mode), slog.Int(logKeySources, r.Sources),
		slog.Uint64(logKeySeed, r.Seed),
		slog.Float64("sqrt_pehe", r.SqrtPEHE), slog.Float64("ate_err", r.ATEErr),
		slog.Float64(logKeySeconds, r.TrainSeconds), slog.Int(logKeyRounds, r.Rounds))
}

// defaultAutoKernels are the installed kernels with the parameters the
// issue names: Gaussian, Laplacian and Matérn ν = ½, 3/2, 5/2.
const defaultAutoKernels = "gaussian,laplacian,matern:nu=0.5,matern:nu=1.5,matern:nu=2.5"

// openAutoKernels opens the kernels of a --auto-kernels list into
// plan.Kernels, each plugin once, and returns what closes them.
func (a *app) openAutoKernels(cmd *cobra.Command, dir, list string, plan *evaluate.Plan) (func(), error) {
	open := map[string]*kernels.Client{}
	closeAll := func() {
		for _, c := range open {
			c.Close()
		}
	}
	for _, item := range strings.Split(list, ",") {
		fields := strings.Split(strings.TrimSpace(item), ":")
		name := fields[0]
		grid, rest, err := config.ParseGridPoint(fields[1:])
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("--auto-kernels %q: %w", item, err)
		}
		params, err := parseKernelParams(rest)
		if err != nil || name == "" {
			closeAll()
			return nil, fmt.Errorf("--auto-kernels %q: %q is not NAME or NAME:PARAM=VALUE", list, item)
		}
		c, ok := open[name]
		if !ok {
			if c, err = a.openKernel(cmd, dir, name, nil); err != nil {
				closeAll()
				return nil, fmt.Errorf("--auto-kernels: %w", err)
			}
			open[name] = c
		}
		bound, err := c.WithParams(params)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("--auto-kernels %q: %w", item, err)
		}
		label := kernelLabel(modelstore.Kernel{Name: name, Params: params, GridPoint: grid})
		plan.Kernels = append(plan.Kernels, selection.Kernel{Name: label, Spectral: bound, GridPoint: grid})
	}
	return closeAll, nil
}

// parseInts parses exactly n comma-separated non-negative integers.
func parseInts(s string, n int, flag string) ([]int, error) {
	parts := strings.Split(s, ",")
	if len(parts) != n {
		return nil, fmt.Errorf("%s %q: want %d comma-separated numbers", flag, s, n)
	}
	out := make([]int, n)
	for i, p := range parts {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%s %q: %q is not a non-negative integer", flag, s, p)
		}
		out[i] = v
	}
	return out, nil
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
