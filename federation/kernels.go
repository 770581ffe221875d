package federation

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/selection"
)

// A run that selects a model may choose among kernels: besides the run's
// own kernel (CoordinatorConfig.Spectral, kernel 0), each of
// CoordinatorConfig.Extra is kernel 1, 2, …. The sites train the three
// models of every kernel in turn, kernel 0's first, with the same rows and
// the same pooled standardisation; the latent and outcome models of each
// are candidates. Kernel 0 stays the reference: the ridge candidates, the
// validation nuisances and the published effects use its model, as
// selection.Run uses its first kernel's.

// ErrNoKernel reports a site that cannot train a kernel a run chooses
// among: it has no plugin of that name, or does not train further
// kernels (SiteConfig.Kernels is nil). The site refuses the run.
var ErrNoKernel = errors.New("no plugin of a kernel the run chooses among")

// tKernelPrefix names the kernels in a hello: one scalar per kernel,
// "kernels.<name>" = its index, 0 for the run's own (when the coordinator
// names it, CoordinatorConfig.KernelName) and from 1 for the further ones.
const tKernelPrefix = "kernels."

// modelName is the envelope model name of kind with kernel k: the kind's
// name for the run's own kernel, as before kernels were chosen among, and
// "<kind>.<k>" (latent.1) for a further kernel.
func modelName(kind estimator.Kind, k int) string {
	if k == 0 {
		return kind.String()
	}
	return kind.String() + "." + strconv.Itoa(k)
}

// parseModel returns the kind and kernel of the model named s (modelName).
func parseModel(s string) (estimator.Kind, int, error) {
	name, idx, found := strings.Cut(s, ".")
	k := 0
	if found {
		n, err := strconv.Atoi(idx)
		if err != nil || n < 1 || strconv.Itoa(n) != idx {
			return 0, 0, fmt.Errorf("%w: unknown model %q", ErrProtocol, s)
		}
		k = n
	}
	kind, err := parseKind(name)
	return kind, k, err
}

// checkExtra returns an error unless the further kernels extra can be
// chosen among in a run of selection sel: that needs a selection with
// latent or outcome candidates, and kernels of distinct names, none the
// run's own, whose models the run's configuration sets (no grid point).
func checkExtra(sel Selection, extra []selection.Kernel) error {
	if len(extra) == 0 {
		return nil
	}
	if !sel.On() {
		return errors.New("federation: further kernels are candidates of model selection, which the run does not make")
	}
	if !sel.wants(selection.KindLatent) && !sel.wants(selection.KindOutcome) {
		return fmt.Errorf("federation: further kernels give latent and outcome candidates, which the candidate kinds %v leave out", sel.Kinds)
	}
	seen := []string{sel.Kernel}
	for _, k := range extra {
		switch {
		case k.Name == "" || k.Spectral == nil:
			return fmt.Errorf("federation: a further kernel needs a name and a plugin (%q)", k.Name)
		case slices.Contains(seen, k.Name):
			return fmt.Errorf("federation: kernel %q listed twice", k.Name)
		case k.GridPoint != (selection.GridPoint{Transfer: k.Transfer}):
			return fmt.Errorf("federation: kernel %q at a grid point of D or γ: a federation trains every kernel with the run's model.features and model.linear", k.Name)
		case k.Check() != nil:
			return fmt.Errorf("federation: kernel %q: %w", k.Name, k.Check())
		}
		// The sites read the transfer from the name (openKernels): the
		// two must agree.
		if _, t := selection.SplitTransfer(k.Name); t != k.Transfer {
			return fmt.Errorf("federation: kernel %q at transfer %q: its name must end in transfer=%s, as pipeline.KernelLabel writes it", k.Name, k.Transfer, k.Transfer)
		}
		seen = append(seen, k.Name)
	}
	return nil
}

// kernelTensors name the run's kernel (none when run is "") and the
// further kernels names in a hello.
func kernelTensors(run string, names []string) []wire.Tensor {
	var ts []wire.Tensor
	if run != "" {
		ts = append(ts, wire.Scalar(tKernelPrefix+run, 0))
	}
	for j, name := range names {
		ts = append(ts, wire.Scalar(tKernelPrefix+name, float64(j+1)))
	}
	return ts
}

// decodeKernels reads the kernels a hello names: the run's ("" when it
// names none) and the further ones, in order of their index. A hello that
// names more than most kernels (Limits.Kernels, the site's own included) is
// refused before they are read.
func decodeKernels(e *wire.Envelope, most int) (string, []string, error) {
	// The run's kernels: those named, and the site's own when the hello
	// does not name the run's (index 0).
	kernels := 1
	for _, t := range e.Tensors() {
		if strings.HasPrefix(t.Name, tKernelPrefix) {
			if v, err := t.Scalar(); err == nil && v == 0 {
				kernels--
			}
			kernels++
		}
	}
	if kernels > most {
		return "", nil, overLimit("kernel count", kernels, most, "kernels")
	}
	byIndex := map[int]string{}
	for _, t := range e.Tensors() {
		name, ok := strings.CutPrefix(t.Name, tKernelPrefix)
		if !ok {
			continue
		}
		v, err := t.Scalar()
		if err != nil || v < 0 || v != math.Trunc(v) || v > float64(len(e.Tensors())) || name == "" {
			return "", nil, fmt.Errorf("%w: hello names kernel %q at index %v", ErrProtocol, name, v)
		}
		if _, dup := byIndex[int(v)]; dup {
			return "", nil, fmt.Errorf("%w: hello names two kernels at index %v", ErrProtocol, v)
		}
		byIndex[int(v)] = name
	}
	run, own := byIndex[0]
	delete(byIndex, 0)
	names := make([]string, len(byIndex))
	for j := range names {
		name, ok := byIndex[j+1]
		if !ok {
			return "", nil, fmt.Errorf("%w: hello names kernels at indices that are not 1 to %d", ErrProtocol, len(names))
		}
		names[j] = name
	}
	if !own {
		run = ""
	}
	return run, names, nil
}

// openKernels opens the kernels a run names and returns every kernel's
// plugin and name, the run's first. The run's is the site's own
// (SiteConfig.Spectral), unless the run names another and the site has
// others (SiteConfig.Kernels): a site with several kernels trains the one
// the coordinator names. The further kernels names come from
// SiteConfig.Kernels.
func (s *site) openKernels(ctx context.Context, run string, names []string) ([]estimator.Spectral, []string, error) {
	spectra, all := []estimator.Spectral{s.cfg.Spectral}, []string{s.cfg.KernelName}
	if run != "" && run != s.cfg.KernelName && s.cfg.Kernels != nil {
		// A site without other kernels trains its own, and the
		// frequency fingerprint tells the coordinator they differ.
		sp, err := s.cfg.Kernels(ctx, run)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: kernel %q: %w", ErrNoKernel, run, err)
		}
		spectra[0], all[0] = sp, run
	}
	if len(names) == 0 {
		return spectra, all, nil
	}
	if s.share == 0 {
		return nil, nil, fmt.Errorf("%w: further kernels in a run that selects no model", ErrProtocol)
	}
	if most := s.cfg.Limits.orDefault().Kernels; len(names)+1 > most {
		return nil, nil, overLimit("kernel count", len(names)+1, most, "kernels")
	}
	for _, name := range names {
		if slices.Contains(all, name) {
			return nil, nil, fmt.Errorf("%w: kernel %q named twice", ErrProtocol, name)
		}
		// A kernel at a transfer grid point is trained with its base
		// kernel's plugin; the coordinator alone applies the transfer.
		base, transfer := selection.SplitTransfer(name)
		if transfer != "" {
			t, err := estimator.ParseTransfer(transfer)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: kernel %q: %w", ErrProtocol, name, err)
			}
			if l := s.cfg.Limits.orDefault(); len(l.Transfers) > 0 && !slices.Contains(l.Transfers, t) {
				return nil, nil, fmt.Errorf("%w: kernel %q: transfer %v not allowed (limits.transfers)", ErrLimit, name, t)
			}
		}
		var sp estimator.Spectral
		var err error
		if base == all[0] {
			sp = spectra[0]
		} else if s.cfg.Kernels == nil {
			err = fmt.Errorf("the run chooses among the kernels %s and %s, and site %s trains its own alone (kernel.name auto at the site trains the kernels it has)",
				all[0], strings.Join(names, ", "), s.cfg.Name)
		} else {
			sp, err = s.cfg.Kernels(ctx, base)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%w: kernel %q: %w", ErrNoKernel, name, err)
		}
		spectra, all = append(spectra, sp), append(all, name)
	}
	return spectra, all, nil
}

// setupsFor returns the setup of each of spectra under cfg, at grid
// point points[k-1] for k ≥ 1 (nil: none), and scaler.
func setupsFor(ctx context.Context, schema estimator.Schema, spectra []estimator.Spectral, cfg estimator.Config, points []selection.GridPoint, scaler estimator.Scaler) ([]*estimator.Setup, error) {
	out := make([]*estimator.Setup, len(spectra))
	for k, sp := range spectra {
		c := cfg
		if k > 0 && k <= len(points) {
			c = points[k-1].Config(cfg)
		}
		var err error
		if out[k], err = estimator.NewSetup(ctx, schema, sp, c, scaler); err != nil {
			return nil, fmt.Errorf("kernel %d: %w", k, err)
		}
	}
	return out, nil
}

// digests returns the frequency fingerprint of each setup.
func digests(setups []*estimator.Setup) []wire.Digest {
	out := make([]wire.Digest, len(setups))
	for k, s := range setups {
		out[k] = frequencyDigest(s)
	}
	return out
}

// modelLabel names model kind of kernel k for people: its kind, and for a
// further kernel's model (k ≥ 1, named further[k-1]) that kernel's name
// too, "latent (laplacian)".
func modelLabel(kind estimator.Kind, k int, further []string) string {
	if k == 0 || k > len(further) {
		return kind.String()
	}
	return fmt.Sprintf("%s (%s)", kind, further[k-1])
}
