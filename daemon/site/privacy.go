package site

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/store"
)

// privateColumns sets the outcome's bound of p from p.Bounds (the entry
// of the outcome column) and checks that p bounds every continuous column
// of recs: a private site refuses to start, naming every column without a
// bound, unless privacy.exact names the aggregates that need them. Bounds
// of columns that recs lacks are logged, since they are most often typos.
func privateColumns(log *slog.Logger, p *federation.SitePrivacy, src store.Source, recs *store.Records) error {
	if p == nil {
		return nil
	}
	covariates := recs.Layout.Covariates
	p.Outcome = nil
	var unknown []string
	for name, b := range p.Bounds {
		switch {
		case strings.EqualFold(name, src.OutcomeColumn):
			p.Outcome = &b
		case !slices.ContainsFunc(covariates, func(c string) bool { return strings.EqualFold(c, name) }):
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		log.Warn("privacy.bounds names columns that are neither a covariate nor the outcome", slog.String(logKeyColumn, strings.Join(unknown, ",")))
	}
	if err := p.CheckColumns(covariates, recs.Schema); err != nil {
		return fmt.Errorf("%w (the outcome is column %s)", err, src.OutcomeColumn)
	}
	return nil
}

// storeLedger keeps a site's privacy charges in its SQLite file.
type storeLedger struct{ db *store.Site }

// Charges returns the charges recorded in crff_privacy.
func (l storeLedger) Charges(ctx context.Context) ([]federation.Charge, error) {
	cs, err := l.db.PrivacyCharges(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]federation.Charge, len(cs))
	for i, c := range cs {
		out[i] = federation.Charge{RunID: c.Run, Step: c.Step, At: c.At, Rounds: c.Rounds, Steps: c.Steps, Q: c.Q, Noise: c.Noise, Clip: c.Clip,
			Delta: c.Delta, Epsilon: c.Epsilon, Total: c.Total, Budget: c.Budget, Relation: c.Relation, Exact: c.Exact}
	}
	return out, nil
}

// Record appends c to crff_privacy.
func (l storeLedger) Record(ctx context.Context, c federation.Charge) error {
	return l.db.AppendPrivacyCharge(ctx, store.PrivacyCharge{Run: c.RunID, Step: c.Step, At: c.At, Rounds: c.Rounds, Steps: c.Steps, Q: c.Q,
		Noise: c.Noise, Clip: c.Clip, Delta: c.Delta, Epsilon: c.Epsilon, Total: c.Total, Budget: c.Budget, Relation: c.Relation, Exact: c.Exact})
}

// logPrivacy logs, as a private site starts, its budget and the
// aggregates it releases exactly (privacy.exact) and with noise.
func logPrivacy(log *slog.Logger, p *federation.SitePrivacy) {
	if p == nil {
		return
	}
	exact, noised, withheld := p.Aggregates()
	log.Info("differential privacy on: the training rounds and the aggregates noised are released with noise, those exact without",
		slog.Float64("epsilon", p.Epsilon), slog.Float64("run_epsilon", p.RunEpsilon), slog.Float64("delta", p.Delta),
		slog.String(logKeyExact, strings.Join(exact, ",")), slog.String(logKeyNoised, strings.Join(noised, ",")),
		slog.String(logKeyWithheld, strings.Join(withheld, ",")), slog.String(logKeyRelation, federation.Relation))
}
