package federation

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/crffd/crffd/estimator"
)

// ErrLimit reports that a coordinator asked a site for more than its
// Limits allow. The site refuses the run and tells the coordinator why.
var ErrLimit = errors.New("beyond the site's limits")

// ErrBudget reports that a run would spend more of a site's privacy budget
// than it has left. The site refuses the run before it computes anything
// from its rows.
var ErrBudget = errors.New("beyond the site's privacy budget")

// Limits bound what a coordinator may ask of a site. A site checks the
// configuration of a run's hello against them before it computes anything
// from its rows, and counts the rounds it answers, so that a coordinator
// cannot size the site's allocations, nor ask for as many gradients as it
// likes. Every count an envelope carries that sizes what the site
// allocates or loops over is checked against one of them, or against the
// site's own rows, before the site allocates: the sites of a run (Sites),
// the kernels (Kernels), model selection's candidates (Candidates) and an
// ensemble's members, the rows a dedup-verdict leaves out, and the shape
// of every weight block (the run's configuration, checked here, sets
// them). Zero fields take DefaultLimits' values.
type Limits struct {
	Features int // most random frequencies D per feature map
	Latent   int // most latent dimensions dz
	Draws    int // most noise draws M per row
	Samples  int // most samples per row in effect estimation
	MHSteps  int // most Metropolis–Hastings steps per sample
	Folds    int // most cross-fitting folds
	Rounds   int // most rounds of one model in one run, and the largest rounds setting accepted
	// MinBatch is the smallest mini-batch the site computes a round on.
	// A coordinator that chose batches of one row, which it can place,
	// since it knows the seed that draws them, would be sent each row's
	// own gradient: enough to solve for the row (see the estimator's
	// attack test). A site of at most MinBatch rows computes every round
	// on all of them.
	MinBatch int
	// Kernels is the most kernels whose models the site trains in one
	// run: a run that chooses among kernels (CoordinatorConfig.Extra)
	// asks three models of each, every one a new set of gradients of the
	// site's rows.
	Kernels int
	// Sites is the most sites a run may have: the site keeps every
	// site's name and its row of each model's transfer matrix.
	Sites int
	// Candidates is the most candidates of model selection the site
	// scores in a run: it holds each candidate's CATE of every kept
	// row, and sums over every pair of candidates.
	Candidates int
	// Transfers are the transfer modes the site takes part in; empty
	// allows all three.
	Transfers []estimator.Transfer
}

// DefaultLimits returns the limits a site applies when SiteConfig.Limits
// leaves a field zero. They are far above the defaults and every
// configuration of the benchmarks, and low enough that no allocation they
// permit exhausts a site's memory: D ≤ 4096 and dz ≤ 512 give weight
// blocks of at most 8192×512, and 64 candidates a run of 8 kernels and
// 23 ridge penalties, whose CATEs take 512 bytes per kept row.
func DefaultLimits() Limits {
	return Limits{Features: 4096, Latent: 512, Draws: 64, Samples: 10000, MHSteps: 1000, Folds: 20, Rounds: 100000, MinBatch: 256, Kernels: 8,
		Sites: 1000, Candidates: 64}
}

// orDefault returns l with each zero field set to DefaultLimits' value.
func (l Limits) orDefault() Limits {
	d := DefaultLimits()
	for _, f := range []struct{ v, d *int }{
		{&l.Features, &d.Features}, {&l.Latent, &d.Latent}, {&l.Draws, &d.Draws}, {&l.Samples, &d.Samples},
		{&l.MHSteps, &d.MHSteps}, {&l.Folds, &d.Folds}, {&l.Rounds, &d.Rounds}, {&l.MinBatch, &d.MinBatch}, {&l.Kernels, &d.Kernels},
		{&l.Sites, &d.Sites}, {&l.Candidates, &d.Candidates},
	} {
		if *f.v == 0 {
			*f.v = *f.d
		}
	}
	return l
}

// check refuses a configuration beyond l for a site of rows rows. The
// error names every setting beyond its limit.
func (l Limits) check(cfg estimator.Config, rows int) error {
	l = l.orDefault()
	var over []string
	for _, c := range []struct {
		name   string
		v, max int
	}{
		{"features", cfg.Features, l.Features}, {"latent", cfg.Latent, l.Latent}, {"draws", cfg.Draws, l.Draws},
		{"samples", cfg.Samples, l.Samples}, {"mh_steps", cfg.MHSteps, l.MHSteps}, {"folds", cfg.Folds, l.Folds},
		{"rounds", cfg.Rounds, l.Rounds},
	} {
		if c.v > c.max {
			over = append(over, fmt.Sprintf("%s %d > %d", c.name, c.v, c.max))
		}
	}
	if b := cfg.BatchSize; b > 0 && b < l.MinBatch && b < rows && cfg.Method == estimator.Adam {
		over = append(over, fmt.Sprintf("batch_size %d < %d", b, l.MinBatch))
	}
	if len(l.Transfers) > 0 && !slices.Contains(l.Transfers, cfg.Transfer) {
		over = append(over, fmt.Sprintf("transfer %v not allowed", cfg.Transfer))
	}
	if len(over) > 0 {
		return fmt.Errorf("%w: %s", ErrLimit, strings.Join(over, ", "))
	}
	return nil
}

// overLimit is the ErrLimit error of a run that asks for n of what, more
// than the most that the site's limits.<key> allows. It names the count
// and the limit, as check does for the configuration.
func overLimit(what string, n, most int, key string) error {
	return fmt.Errorf("%w: %s %d > %d (limits.%s)", ErrLimit, what, n, most, key)
}

// roundLimit returns the most rounds of one model the site answers in a
// run: the coordinator trains for cfg.RoundsFor(the largest site's rows),
// which the site does not know, so it allows Limits.Rounds, or with
// privacy the rounds its budget was charged for.
func (s *site) roundLimit() int {
	if s.charge != nil {
		return s.charge.rounds
	}
	return s.cfg.Limits.orDefault().Rounds
}

// countRound counts a round of the model named model (modelName) and
// refuses one beyond
// roundLimit.
func (s *site) countRound(model string) error {
	s.answered[model]++
	if n, max := s.answered[model], s.roundLimit(); n > max {
		return fmt.Errorf("%w: round %d of the %s model, beyond the %d this site answers in a run", ErrLimit, n, model, max)
	}
	return nil
}
