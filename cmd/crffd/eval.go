package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/config"
	"github.com/crffd/crffd/evaluate"
	"github.com/crffd/crffd/plugins/kernels"
	"github.com/crffd/crffd/progress"
)

func newEvalCmd(a *app) *cobra.Command {
	o := config.DefaultEvalOptions()
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
it reports the doubly robust AIPW estimate on the same test rows, with
nuisances from a super learner fitted on the test source's training rows (the
mode's propensity and outcome models stacked with logistic regression and
least squares, weighted by cross-validated loss): AIPW ERROR (mean
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
penalties 1, 10 and 100. It reports their ensemble, with the AIPW and
calibrated-CATE figures of the first kernel's nuisance models: the mean CATE of the
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
	f.StringVar(&o.Data, "data", "", "a CSV file or a directory of CSV files (one per replicate)")
	f.StringVar(&o.Sources, "sources", o.Sources, "numbers of training sources to compare, e.g. 1,2,3")
	f.IntVar(&o.SourceSize, "source-size", o.SourceSize, "rows per source")
	f.IntSliceVar(&o.Split, "split", o.Split, "training, test and validation rows per source")
	f.StringVar(&o.Replicates, "replicates", "", "replicates to run, e.g. 1-10 (default: every file)")
	f.StringSliceVar(&o.Modes, "modes", o.Modes, "comma-separated: learned, none, full, tlearner, auto")
	f.StringSliceVar(&o.AutoKernels, "auto-kernels", o.AutoKernels, "kernels of the auto mode's candidates, the first the reference: NAME or NAME:PARAM=VALUE, comma-separated; features=N and linear=G set a kernel's own D and γ (a grid point: gaussian:features=100:linear=0)")
	f.StringVar(&o.AutoEstimator, "auto-estimator", o.AutoEstimator, "the auto mode's candidate kinds, as model.estimator: auto (all), latent, outcome, tlearner or dr")
	f.Float64Var(&o.SelectionZ, "selection-z", o.SelectionZ, "standard errors of the paired loss difference from the best within which an auto candidate joins the ensemble")
	f.BoolVar(&o.AutoBySite, "auto-by-site", true, "auto: each source chooses its own ensemble on its validation rows, pooled across sources by random effects, as site daemons do by default (model.selection_by_site); false: the federation's one ensemble")
	f.IntVar(&o.TestSource, "test-source", o.TestSource, "source whose test rows are scored")
	f.StringVar(&o.Kernel, "kernel", o.Kernel, "kernel plugin name")
	f.StringArrayVar(&o.KernelParams, "kernel-param", nil, "kernel parameter NAME=VALUE, e.g. nu=2.5 (repeatable)")
	f.BoolVar(&o.JSON, "json", false, "print every run and the summary as JSON")
	f.IntVar(&o.Config.Features, "features", o.Config.Features, "random frequencies D per feature map")
	f.IntVar(&o.Config.Latent, "latent", o.Config.Latent, "latent dimension dz")
	f.IntVar(&o.Config.Rounds, "rounds", o.Config.Rounds, "maximum federated rounds per model")
	f.StringVar(&o.Optimizer, "optimizer", o.Optimizer, "lbfgs or adam")
	f.Float64Var(&o.Config.LearningRate, "learning-rate", o.Config.LearningRate, "Adam step size")
	f.Float64Var(&o.Config.TransferPrior, "transfer-prior", o.Config.TransferPrior, "κ of a Beta(1+κ,1) prior on every learned λ")
	f.IntVar(&o.Config.Samples, "samples", o.Config.Samples, "effect samples per row")
	f.IntVar(&o.Config.MHSteps, "mh-steps", o.Config.MHSteps, "Metropolis–Hastings steps per sample (0: sample z from q)")
	f.Uint64Var(&o.Config.Seed, "seed", o.Config.Seed, "seed of frequencies, initial weights and sampling")
	f.StringVar(&o.Seeds, "seeds", "", "repeat every run with each of these seeds, e.g. 0-4, and average them per replicate (instead of --seed)")
	f.IntVar(&o.Config.Folds, "folds", o.Config.Folds, "folds over which --crossfit cross-fits the nuisances")
	f.Float64SliceVar(&o.Epsilons, "epsilon", nil, "run each transfer mode at each differential-privacy ε, e.g. 1,4,16,inf (every source private; inf: exact); needs --optimizer adam")
	f.Float64Var(&o.Delta, "delta", 1e-5, "δ of the --epsilon runs")
	f.Float64Var(&o.Clip, "clip", 1, "per-row gradient clip norm of the --epsilon runs")
	f.StringArrayVar(&o.Bounds, "bounds", nil, "public range of a continuous column in the --epsilon runs, NAME=LO,HI (x1, x2, …, and y for the outcome; repeatable), as privacy.bounds")
	f.Float64Var(&o.PsiClip, "psi-clip", 0, "the --epsilon runs' clip bound of the AIPW scores, as privacy.psi_clip (0: 2 × the outcome's width)")
	f.StringSliceVar(&o.Exact, "exact", nil, "aggregates the --epsilon runs' sources release exactly, as privacy.exact (row_count is always)")
	f.BoolVar(&o.CrossFit, "crossfit", false, "cross-fit the AIPW nuisances on the scored rows, as crffd fit does, instead of taking them from the training fit")
	_ = cmd.MarkFlagRequired("data")
	return cmd
}

func runEval(cmd *cobra.Command, a *app, o config.EvalOptions) error {
	plan, err := o.Plan(cmd.Flags().Changed("seed"))
	if err != nil {
		return err
	}
	params, err := config.ParseKernelParams(o.KernelParams)
	if err != nil {
		return err
	}
	dir, err := a.pluginDir()
	if err != nil {
		return err
	}
	kernel, err := a.openKernel(cmd, dir, o.Kernel, params)
	if err != nil {
		return err
	}
	defer kernel.Close()
	plan.Spectral = kernel
	if slices.Contains(plan.Modes, "auto") {
		ks, closeAll, err := config.OpenAutoKernels(o.AutoKernels, func(name string) (*kernels.Client, error) {
			return a.openKernel(cmd, dir, name, nil)
		})
		if err != nil {
			return err
		}
		defer closeAll()
		plan.Kernels = append(plan.Kernels, ks...)
		if err := o.AutoPlan(&plan); err != nil {
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
	if o.JSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(a.stdout, "%d replicates from %s; test rows of source %d; split %d,%d,%d; kernel %s %s\n",
		len(plan.Replicates), o.Data, o.TestSource, plan.Split[0], plan.Split[1], plan.Split[2], o.Kernel, kernel.Params())
	if o.Seeds != "" {
		fmt.Fprintf(a.stdout, "seeds %s: each replicate's runs averaged over the seeds, standard errors over replicates\n", o.Seeds)
	}
	fmt.Fprintln(a.stdout)
	return rep.WriteText(a.stdout)
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
