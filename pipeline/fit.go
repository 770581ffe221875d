package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/inference"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/selection"
	"github.com/crffd/crffd/store"
)

// NewRunID returns a fresh run id: the UTC time and 32 random bits, so
// that ids sort by time and never repeat.
func NewRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// Progress is told of a fit's training rounds and scored rows;
// *progress.Line is one. Done ends a task.
type Progress interface {
	Update(task string, done, total int, detail string)
	Done()
}

// OpenSpectral opens the plugin of one kernel.
type OpenSpectral func(context.Context, modelstore.Kernel) (estimator.Spectral, error)

// OpenKernels opens the plugin of each of ks with open, by KernelLabel.
// Grid points of one kernel share its plugin: one process.
func OpenKernels(ctx context.Context, ks []modelstore.Kernel, open OpenSpectral) (map[string]estimator.Spectral, error) {
	out := map[string]estimator.Spectral{}
	for _, k := range ks {
		base := modelstore.Kernel{Name: k.Name, Params: k.Params}
		sp, ok := out[KernelLabel(base)]
		if !ok {
			var err error
			if sp, err = open(ctx, base); err != nil {
				return nil, err
			}
			out[KernelLabel(base)] = sp
		}
		out[KernelLabel(k)] = sp
	}
	return out, nil
}

// Candidates are the kernels ks as model selection's candidates, with
// their plugins in spectra (OpenKernels).
func Candidates(ks []modelstore.Kernel, spectra map[string]estimator.Spectral) []selection.Kernel {
	out := make([]selection.Kernel, len(ks))
	for i, k := range ks {
		out[i] = selection.Kernel{Name: KernelLabel(k), Spectral: spectra[KernelLabel(k)], GridPoint: k.GridPoint}
	}
	return out
}

// SiteFit configures FitSite: one site's fit alone, as crffd fit runs it.
type SiteFit struct {
	Run     string         // the run id the results are published under
	DB      string         // the site file, named in errors
	Records *store.Records // the rows trained on and scored
	Config  estimator.Config
	// Choice says which estimators and kernels are candidates; its
	// Candidates and OnFitted are FitSite's to fill.
	Choice   Selection
	Open     OpenSpectral
	Progress Progress     // nil: none shown
	Logger   *slog.Logger // nil: nothing logged
	Phases   *Phases      // the steps' times are added here; nil: not timed
}

// Single reports whether the choice leaves one candidate, which needs no
// held-out rows: the latent or outcome CATE of one kernel.
func (c Selection) Single() bool {
	return len(c.Kernels) == 1 && len(c.Kinds) == 1 && (c.Kinds[0] == selection.KindLatent || c.Kinds[0] == selection.KindOutcome)
}

// Fit is what FitSite trained and scored.
type Fit struct {
	Run      Run            // ready to Publish
	ATEs     inference.ATEs // the local ATEs
	Selected *Selected      // the model selection; nil when there was no choice
	Losses   []store.Loss   // the training rounds of the run's own kernel
}

// FitSite trains the models c.Choice asks for on c.Records (every
// candidate, keeping the chosen one's, when there is a choice), scores
// every row, and computes their AIPW ATE.
func FitSite(ctx context.Context, c SiteFit) (*Fit, error) {
	if c.Records == nil || c.Records.Data == nil || c.Open == nil || len(c.Choice.Kernels) == 0 {
		return nil, fmt.Errorf("fit %q: no records, kernel opener or candidate kernel", c.DB)
	}
	if c.Progress == nil {
		c.Progress = noProgress{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	f, err := trainSite(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("fit %q: %w", c.DB, err)
	}
	if err := scoreSite(ctx, c, f); err != nil {
		return nil, err
	}
	return f, nil
}

// noProgress shows nothing.
type noProgress struct{}

func (noProgress) Update(string, int, int, string) {}
func (noProgress) Done()                           {}

func trainSite(ctx context.Context, c SiteFit) (*Fit, error) {
	recs, ch := c.Records, c.Choice
	if !ch.Single() {
		c.Logger.Info("fitting the candidates of model selection", slog.String("run", c.Run), slog.Int("kernels", len(ch.Kernels)),
			slog.Float64("validation_share", ch.Share))
		spectra, err := OpenKernels(ctx, ch.Kernels, c.Open)
		if err != nil {
			return nil, err
		}
		ch.Candidates = Candidates(ch.Kernels, spectra)
		start := time.Now()
		var trained time.Duration // until the last kernel's models were fitted
		ch.OnFitted = func(done, total int) {
			c.Progress.Update("fitting the candidates' kernels", done, total, "kernels")
			if done == total {
				trained = time.Since(start)
			}
		}
		sel, err := Select(ctx, recs.Data, recs.Schema, c.Config, ch)
		c.Progress.Done()
		if err != nil {
			return nil, err
		}
		// Selection trains its kernels' three models first, all at once,
		// then fits and scores the other candidates.
		c.Phases.Add(fmt.Sprintf("train (%d of kernel × model)", 3*len(ch.Kernels)), trained)
		c.Phases.Add("select", time.Since(start)-trained)
		return &Fit{Run: Run{Fitted: sel.Fitted}, Selected: sel, Losses: sel.Losses}, nil
	}
	spectral, err := c.Open(ctx, ch.Kernels[0])
	if err != nil {
		return nil, err
	}
	f := &Fit{}
	timed := c.Phases.round(time.Now())
	tctx := estimator.WithProgress(ctx, func(p estimator.Progress) {
		timed(p)
		c.Progress.Update("training "+p.Model.String(), p.Round, p.MaxRounds, fmt.Sprintf("loss %.4g", p.Loss))
		f.Losses = append(f.Losses, store.Loss{Model: p.Model.String(), Round: p.Round, Loss: p.Loss})
	})
	model, err := estimator.Fit(tctx, []*estimator.Data{recs.Data}, recs.Schema, spectral, c.Config)
	c.Progress.Done()
	if err != nil {
		return nil, err
	}
	f.Run.Fitted = Fitted{Models: []*estimator.Model{model}, Kernels: ch.Kernels[:1], Estimator: selection.Estimator{Kind: ch.Kinds[0]}}
	return f, nil
}

// scoreSite scores every row with the models of f, computes their AIPW
// ATE, and completes f.Run and f.ATEs.
func scoreSite(ctx context.Context, c SiteFit, f *Fit) error {
	recs, model := c.Records, f.Run.Fitted.Models[0]
	start := time.Now()
	var eff *estimator.Effects
	if sel := f.Selected; sel != nil && model == sel.Result.Models[0] && sel.Result.Effects != nil && sel.Result.Effects[0] != nil {
		// Model selection scored every row with this model for its latent
		// candidate: the same effects, bit for bit.
		eff = sel.Result.Effects[0]
	} else {
		sctx := estimator.WithScoringProgress(ctx, func(done, total int) { c.Progress.Update("scoring", done, total, "rows") })
		var err error
		eff, err = model.Effects(sctx, 0, recs.Data)
		c.Progress.Done()
		if err != nil {
			return fmt.Errorf("score %q: %w", c.DB, err)
		}
	}
	cate, err := f.Run.Fitted.CATE(ctx, 0, recs.Data, eff.CATE)
	if err != nil {
		return fmt.Errorf("score %q: %w", c.DB, err)
	}
	start = c.Phases.Since("score", start)
	var nu *inference.Nuisance
	if f.Selected != nil && model == f.Selected.Result.Models[0] && f.Selected.Result.Nuisance[0].Len() == recs.Len() {
		// Model selection cross-fitted these rows' nuisances under this
		// model's setup for its held-out losses: the AIPW ATE reuses them.
		nu = &f.Selected.Result.Nuisance[0]
	} else {
		c.Logger.Info("cross-fitting the nuisance models of the AIPW ATE", slog.String("run", c.Run), slog.Int("folds", c.Config.Folds))
	}
	an, local, err := Analyse(ctx, model, recs.Data, cate, nu)
	if err != nil {
		return fmt.Errorf("ATE of %q: %w", c.DB, err)
	}
	WarnUncalibrated(c.Logger, c.DB, recs.Len(), an.Calibration)
	ns, err := KeptNuisance(ctx, model.Setup, recs.Data, an.Stack)
	if err != nil {
		return fmt.Errorf("nuisance models of %q: %w", c.DB, err)
	}
	start = c.Phases.Since("cross-fit", start)
	fitted := f.Run.Fitted
	f.Run = Run{ID: c.Run, Records: recs, Fitted: fitted, Setup: modelstore.Setup{Config: c.Config, Scaler: model.Setup.Scaler, Site: 0, Sites: 1},
		Effects: eff, CATE: cate, Scores: AnalysisScores(an), Calibration: an.Calibration, Nuisance: ns,
		Results: store.Results{ATE: ATERows(store.ScopeLocal, local), Nuisance: NuisanceRows(an.Stack)}, Logger: c.Logger}
	if f.Selected != nil {
		f.Run.Results.Selection = f.Selected.Rows
		if err := testHeterogeneity(c, f, cate, an); err != nil {
			return fmt.Errorf("heterogeneity of %q: %w", c.DB, err)
		}
		c.Phases.Since("heterogeneity", start)
	}
	f.ATEs = local
	return nil
}

// testHeterogeneity sets the heterogeneity tests and policy values of f's
// run, on the rows model selection held out of the CATE's training.
func testHeterogeneity(c SiteFit, f *Fit, cate []float64, an *inference.Analysis) error {
	start := time.Now()
	h, why, err := Heterogeneity(HeterogeneityInput{Held: f.Selected.Held, PSI: an.Scores, Control: an.Control, CATE: cate,
		Calibration: an.Calibration, X: c.Records.Data.X, Columns: c.Records.Layout.Covariates, Thresholds: c.Choice.Thresholds})
	if err != nil {
		return err
	}
	if h == nil {
		c.Logger.Info("heterogeneity not tested", slog.String("run", c.Run), slog.String("reason", why))
	} else {
		// Timed, since the tests' cost is part of a fit's budget.
		c.Logger.Info("heterogeneity tested", slog.String("run", c.Run), slog.Int("rows", len(f.Selected.Held)),
			slog.String("elapsed", time.Since(start).Round(time.Millisecond).String()))
	}
	f.Run.Results.Heterogeneity = h
	return nil
}
