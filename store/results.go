package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/crffd/crffd/sqlfiles"
)

// CATE is the estimated effect for one row.
type CATE struct {
	RowID RowID
	// CATE is the reported CATE, SE its standard error and Lower..Upper
	// its 95% interval; SE, Lower and Upper are NaN when there is none
	// (stored as NULL).
	CATE, SE, Lower, Upper float64
	// The CausalRFF model's own figures: Latent is the mean of the sampled
	// effects ŷ1 − ŷ0 over the latent z, LatentSD their standard deviation
	// and LatentQ025, LatentQ975 their 2.5% and 97.5% quantiles.
	Latent, LatentSD       float64
	LatentQ025, LatentQ975 float64
	Y0, Y1                 float64 // mean predicted outcome under control and under treatment
	Propensity             float64 // p(w=1|x)
	// XDigest is Records.XDigests of the row the CATE was computed from;
	// nil for none, and then the CATE is kept when the row is edited.
	XDigest *RowDigest
	// Raw is the chosen estimator's CATE before calibration, whose mean is
	// the plug-in ATE; PSI is the row's AIPW score ψ, whose mean is the
	// AIPW ATE, and PSIClipped whether its propensity was clipped. Raw and
	// PSI are NaN when unknown (PSI for a row without a valid treatment
	// and outcome), and stored as NULL. [Site.UpdateLocalATE] averages
	// them.
	Raw, PSI   float64
	PSIClipped bool

	Run      string    // set when read back; ignored when writing
	ScoredAt time.Time // set when read back; ignored when writing
}

// Scope is the scope of an average treatment effect.
type Scope string

// Scopes of crff_ate.
const (
	ScopeLocal  Scope = "local"  // over this site's rows
	ScopeGlobal Scope = "global" // over every site of the federation
)

// Estimators of crff_ate: the names of package inference.
const (
	EstimatorAIPW   = "aipw"   // doubly robust, cross-fitted, with a standard error
	EstimatorPlugIn = "plugin" // the mean of the CausalRFF CATEs, without one
)

// ATE is an average treatment effect by one estimator.
type ATE struct {
	Scope     Scope
	Estimator string // EstimatorAIPW or EstimatorPlugIn
	ATE       float64
	// SE is the standard error and Lower..Upper the 95% interval; NaN when
	// the estimator has none (stored as NULL).
	SE           float64
	Lower, Upper float64
	N            int // rows it averages over
	// Clipped is the number of rows whose propensity was clipped, or −1
	// when the estimator uses none (stored as NULL).
	Clipped int
	// Sites are the names of the sites a global ATE covers (nil when
	// unknown, and for a local ATE).
	Sites []string
	// Private is set when rows of a differentially private site went into
	// the estimate (migration 0017 says what that implies), and NoiseSE is
	// the part of SE that the noise of the private sites' sums accounts
	// for, SE² = sampling variance + NoiseSE² (0 for exact sums).
	Private bool
	NoiseSE float64

	Run        string    // set when read back; ignored when writing
	ComputedAt time.Time // set when read back; ignored when writing
}

// Transfer is a learned transfer factor λ from this site to a peer, for
// one model.
type Transfer struct {
	Peer   string
	Model  string
	Lambda float64 // in [0, 1]

	Run string // set when read back; ignored when writing
}

// Selection is one candidate of a run's model selection, a row of
// crff_model_selection (migration 0007 documents the columns).
type Selection struct {
	Candidate    string
	Kind         string
	Kernel       string  // empty for candidates without a kernel of their own
	Ridge        float64 // the ridge penalty, or 0 for none
	Loss, SE     float64 // SE and DiffSE are stored as NULL for the ensemble, which has none
	Diff, DiffSE float64
	Chosen       bool
	Member       bool    // one of the ensemble's members
	Shift        float64 // the ensemble's shift
	N            int     // validation rows
	// Site holds, under a choice per site, the candidate's pooled and own
	// differences from the site's best (migration 0020): SiteDiff,
	// SiteDiffSE, OwnDiff, OwnDiffSE; nil for none, and OwnDiff nil where
	// the site has no own differences.
	Site *SiteDiffs
}

// SiteDiffs are a candidate's differences under a choice per site.
type SiteDiffs struct {
	Diff, DiffSE float64
	Own, OwnSE   *float64
}

// Nuisance is one learner's part in a run's choice of a nuisance model, a
// row of crff_nuisance (migration 0018 documents the columns).
type Nuisance struct {
	Model   string  // "propensity", "mu0" or "mu1" (inference.Stack's names)
	Learner string  // a learner's name, or NuisanceStack
	Weight  float64 // ignored for NuisanceStack
	Loss    float64
	N       int
}

// NuisanceStack names crff_nuisance's row of the stack itself.
const NuisanceStack = "stack"

// Results are everything a run publishes at a site.
type Results struct {
	CATE      []CATE      // one per scored row, each id once
	ATE       []ATE       // at most one per scope and estimator
	Transfer  []Transfer  // at most one per (peer, model)
	Rejected  []Rejection // the rows left out of the run (Records.Rejected)
	Selection []Selection // the candidates of the run's model selection, if any
	Nuisance  []Nuisance  // the choice of the run's nuisance models, if recorded
	GATE      []GATE      // the global effects of a federation's subgroups, if any
	// Heterogeneity are the run's heterogeneity tests and policy values,
	// if it held rows out of the CATE's training.
	Heterogeneity *Heterogeneity
}

// cateChunk is the most CATEs one transaction writes or deletes: a
// transaction of crffd's holds the file's write lock, and the user's own
// writers wait for it, so none may take long (about 0.1 s on a slow disk).
// A variable so that tests can write a few rows per transaction.
var cateChunk = 10000

// WriteResults publishes run's results. First, when res.CATE holds rows,
// it writes them as run's CATEs (replacing any written before) in
// transactions of at most cateChunk rows (WriteCATE), which no reader of
// crff_cate sees while run is not current; a fit that wrote its CATEs
// with WriteCATE as it scored them passes none. Then, in one small
// transaction, it replaces everything in crff_ate, crff_transfer,
// crff_rejected, crff_model_selection, crff_nuisance, crff_heterogeneity,
// crff_clan and crff_policy with res, makes run the current run (crff_cate
// is the current run's rows), deletes every other run together with its
// model state, and (re)creates the crff_cate_records view over the run's
// table, and the crff_overlap view of its propensities. Last it deletes the
// other runs' CATEs, again cateChunk at a time (DeleteOldCATE; a failure
// there is logged, not returned, since the run is published and the rows
// are out of crff_cate), and logs a warning when some propensities lie
// outside [0.01, 0.99]. Readers in
// other connections and processes see either the old results or the new
// ones, never a mix, and a crash at any moment leaves one or the other
// (and perhaps rows of runs that are not current, which the next
// publication deletes). The run must have been recorded with BeginRun (or
// be the current run, to rewrite its results: its CATEs are then replaced
// in the one transaction). WriteResults never touches the user's tables.
func (s *Site) WriteResults(ctx context.Context, run string, res Results) error {
	if err := checkResults(res); err != nil {
		return fmt.Errorf("write results of run %q to %q: %w", run, s.path, err)
	}
	cur, err := s.CurrentRun(ctx)
	if err != nil && !errors.Is(err, ErrNoRun) {
		return err
	}
	rewrite := err == nil && cur.ID == run
	var rows int // the run's CATEs, however written
	if !rewrite && len(res.CATE) > 0 {
		// A CATE written by an earlier attempt to publish run would be
		// written twice.
		if err := s.DiscardCATE(ctx, run); err != nil {
			return err
		}
		if err := s.WriteCATE(ctx, run, res.CATE); err != nil {
			return err
		}
	}
	err = s.writeTx(ctx, "write results to", func(tx *sql.Tx) error {
		r, err := scanRun(tx.QueryRowContext(ctx, runColumns+` WHERE run = ?`, run))
		if err != nil {
			return fmt.Errorf("run %q: %w", run, err)
		}
		if rewrite != (r.State == RunCurrent) {
			return fmt.Errorf("%w: run %q was published while its results were written", ErrStaleRun, run)
		}
		for _, t := range []string{"crff_ate", "crff_transfer", "crff_rejected", "crff_model_selection", "crff_nuisance", "crff_gate",
			"crff_heterogeneity", "crff_clan", "crff_policy"} {
			if _, err := tx.ExecContext(ctx, "DELETE FROM "+t); err != nil {
				return err
			}
		}
		// Delete every other run (the old current one included, and with
		// it its model state), then promote this one. The old run's CATEs
		// leave crff_cate with it; their rows are deleted after.
		if _, err := tx.ExecContext(ctx, `DELETE FROM crff_run WHERE run <> ?`, run); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE crff_run SET state = 'current', published_at = ? WHERE run = ?`, now(), run); err != nil {
			return err
		}
		if rewrite {
			if _, err := tx.ExecContext(ctx, `DELETE FROM crff_cate_rows WHERE run = ?`, run); err != nil {
				return err
			}
			if err := insertCATE(ctx, tx, run, res.CATE, false); err != nil {
				return err
			}
		}
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM crff_cate_rows WHERE run = ?`, run).Scan(&rows); err != nil {
			return err
		}
		if err := upsertATE(ctx, tx, run, res.ATE); err != nil {
			return err
		}
		if err := insertTransfer(ctx, tx, run, res.Transfer); err != nil {
			return err
		}
		if err := insertRejected(ctx, tx, run, res.Rejected); err != nil {
			return err
		}
		if err := insertSelection(ctx, tx, run, res.Selection); err != nil {
			return err
		}
		if err := insertNuisance(ctx, tx, run, res.Nuisance); err != nil {
			return err
		}
		if err := insertHeterogeneity(ctx, tx, run, res.Heterogeneity); err != nil {
			return err
		}
		if err := s.ensureCateRecords(ctx, tx, r.Layout); err != nil {
			return err
		}
		for _, g := range res.GATE {
			if g.Scope != ScopeGlobal {
				return fmt.Errorf("%w: subgroup %q of scope %q; a run's results carry the global ones", ErrBadResult, g.Subgroup, g.Scope)
			}
		}
		if err := insertGATE(ctx, tx, run, res.GATE); err != nil {
			return err
		}
		if _, err := s.updateLocalGATE(ctx, tx, run, r.Layout); err != nil {
			return fmt.Errorf("subgroups: %w", err)
		}
		if err := ensureWhatIf(ctx, tx, r.Layout); err != nil {
			return fmt.Errorf("what-if rows: %w", err)
		}
		return s.ensureOverlap(ctx, tx, r.Layout)
	})
	if err != nil {
		return err
	}
	s.log.InfoContext(ctx, "run published", "path", s.path, "run", run,
		"rows", rows, "rejected", len(res.Rejected))
	// The run is published: old rows left by a failure here are out of
	// crff_cate, and the next publication deletes them.
	if _, err := s.DeleteOldCATE(ctx); err != nil {
		s.log.WarnContext(ctx, "old CATEs not deleted yet", "path", s.path, "run", run, "error", err.Error())
	}
	s.warnPositivity(ctx, run)
	return nil
}

// WriteCATE adds cs to the CATEs of run, a run begun (BeginRun) and not
// yet published, in transactions of at most cateChunk rows: so that a
// fit can write its rows as it scores them, and no writer to the file
// waits for all of them. No reader of crff_cate sees them before
// WriteResults publishes run. A row written twice is an error.
func (s *Site) WriteCATE(ctx context.Context, run string, cs []CATE) error {
	if err := checkCATE(cs); err != nil {
		return fmt.Errorf("write CATEs of run %q to %q: %w", run, s.path, err)
	}
	for lo := 0; lo < len(cs); lo += cateChunk {
		chunk := cs[lo:min(lo+cateChunk, len(cs))]
		err := s.chunkTx(ctx, "write CATEs to", func(tx *sql.Tx) error {
			st, err := runState(ctx, tx, run)
			if err != nil {
				return err
			}
			if st != RunTraining {
				return fmt.Errorf("%w: run %q is %s; CATEs are written before it is published", ErrStaleRun, run, st)
			}
			return insertCATE(ctx, tx, run, chunk, false)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// minChunkPause is the shortest pause after a chunk's transaction: a
// waiting writer's busy handler sleeps 1, 2, 5, 10 ms … between its
// retries, and a pause shorter than its sleeps would rarely be seen.
const minChunkPause = 2 * time.Millisecond

// chunkTx runs fn in a write transaction (writeTx) and then waits half as
// long as it took (minChunkPause at least), so that crffd holds the write
// lock at most two thirds of the time while it writes or deletes many
// chunks. SQLite queues no
// one: a writer of the user's waits by retrying, in its busy handler, at
// times that do not know crffd's, and each retry that finds the lock free
// ends its wait. Two thirds makes a wait of 20 retries (about a second of
// SQLite's default busy handler) a chance of about one in 3000.
func (s *Site) chunkTx(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	start := time.Now()
	if err := s.writeTx(ctx, op, fn); err != nil {
		return err
	}
	t := time.NewTimer(max(time.Since(start)/2, minChunkPause))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// DiscardCATE deletes the CATEs written for run, which is not current,
// in transactions of at most cateChunk rows: those of an attempt to
// publish it that stopped, before it is written again.
func (s *Site) DiscardCATE(ctx context.Context, run string) error {
	var st RunState
	err := s.readTx(ctx, "discard CATEs in", func(tx *sql.Tx) error {
		var err error
		st, err = runState(ctx, tx, run)
		return err
	})
	if err != nil {
		return err
	}
	if st == RunCurrent {
		return fmt.Errorf("discard CATEs of run %q in %q: %w: it is current", run, s.path, ErrStaleRun)
	}
	_, err = s.deleteCATE(ctx, "discard CATEs in", `run = ?`, run)
	return err
}

// DeleteOldCATE deletes the CATEs of every run that is not current, in
// transactions of at most cateChunk rows, and returns how many it
// deleted: those of the run published over, and of a run whose
// publication a crash stopped. A run being written (BeginRun, then
// WriteCATE) keeps its rows.
func (s *Site) DeleteOldCATE(ctx context.Context) (int, error) {
	// The runs are found by seeking along the primary key, one step per
	// run, and each is deleted by its own key range: a condition on the
	// run that the key cannot seek ("NOT IN") would scan the current
	// run's rows once per chunk.
	var old []string
	err := s.readTx(ctx, "delete old CATEs from", func(tx *sql.Tx) error {
		last := ""
		for {
			var run sql.NullString
			if err := tx.QueryRowContext(ctx, `SELECT min(run) FROM crff_cate_rows WHERE run > ?`, last).Scan(&run); err != nil {
				return err
			}
			if !run.Valid {
				return nil
			}
			st, err := runState(ctx, tx, run.String)
			if errors.Is(err, ErrNoRun) || err == nil && st != RunCurrent && st != RunTraining {
				old = append(old, run.String)
			} else if err != nil {
				return err
			}
			last = run.String
		}
	})
	if err != nil {
		return 0, err
	}
	var total int
	for _, run := range old {
		n, err := s.deleteCATE(ctx, "delete old CATEs from", `run = ?`, run)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// deleteCATE deletes the rows of crff_cate_rows where cond holds, with
// args, in transactions of at most cateChunk rows, and returns how many.
func (s *Site) deleteCATE(ctx context.Context, op, cond string, args ...any) (int, error) {
	var total int
	for {
		var n int64
		err := s.chunkTx(ctx, op, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `DELETE FROM crff_cate_rows WHERE (run, row_id) IN (
				SELECT run, row_id FROM crff_cate_rows WHERE `+cond+` LIMIT ?)`, append(args, cateChunk)...)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		total += int(n)
		if err != nil || n < int64(cateChunk) {
			return total, err
		}
	}
}

// AppendScores adds the CATE of rows scored after run's results were
// written (see UnscoredRows), and the faults of rows left out, in one
// transaction. A row that already has a CATE keeps it, so that a repeated
// call is harmless. A row scored now loses the crff_rejected lines of an
// earlier read (its faults were mended); a row rejected again keeps its
// lines when its faults are the same, and gets new ones otherwise.
// AppendScores returns how many rows were rejected anew, or for other
// faults than before. It fails with ErrStaleRun when run is no longer the
// current run, so that scores from an old model never mix with a new
// run's. The ATEs are not recomputed; see UpdateLocalATE.
func (s *Site) AppendScores(ctx context.Context, run string, scores []CATE, rejected []Rejection) (int, error) {
	if err := checkCATE(scores); err != nil {
		return 0, fmt.Errorf("append scores of run %q to %q: %w", run, s.path, err)
	}
	var changed int
	if len(scores) == 0 {
		// Most polls only read the rejected rows again: look first, in a
		// read transaction, so that the user's own writers need not wait
		// for crffd's write lock.
		err := s.readTx(ctx, "append scores to", func(tx *sql.Tx) error {
			var err error
			changed, err = replaceRejections(ctx, tx, run, rejected, false)
			return err
		})
		if err != nil || changed == 0 {
			return 0, err
		}
	}
	err := s.writeTx(ctx, "append scores to", func(tx *sql.Tx) error {
		if err := requireCurrent(ctx, tx, run); err != nil {
			return err
		}
		if err := insertCATE(ctx, tx, run, scores, true); err != nil {
			return err
		}
		st, err := tx.PrepareContext(ctx, `DELETE FROM crff_rejected WHERE row_id IS ?`)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, c := range scores {
			if _, err := st.ExecContext(ctx, c.RowID); err != nil {
				return fmt.Errorf("mended row %s: %w", c.RowID, err)
			}
		}
		changed, err = replaceRejections(ctx, tx, run, rejected, true)
		return err
	})
	return changed, err
}

// replaceRejections makes the crff_rejected lines of each row of rs those
// of rs, leaving alone the rows whose lines are already the same (so that
// rejected_at tells when a fault was first seen), and returns how many
// rows' lines it changed; with write false it only counts them.
func replaceRejections(ctx context.Context, tx *sql.Tx, run string, rs []Rejection, write bool) (int, error) {
	type line struct{ column, reason string }
	var order []RowID
	want := map[RowID][]line{}
	for _, r := range rs {
		if _, ok := want[r.RowID]; !ok {
			order = append(order, r.RowID)
		}
		want[r.RowID] = append(want[r.RowID], line{r.Column, r.Reason})
	}
	changed := 0
	for _, id := range order {
		rows, err := tx.QueryContext(ctx, `SELECT column_name, reason FROM crff_rejected WHERE row_id IS ?`, id)
		if err != nil {
			return 0, err
		}
		var have []line
		for rows.Next() {
			var l line
			if err := rows.Scan(&l.column, &l.reason); err != nil {
				rows.Close()
				return 0, err
			}
			have = append(have, l)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, err
		}
		cmp := func(a, b line) int { return strings.Compare(a.column+"\x00"+a.reason, b.column+"\x00"+b.reason) }
		w := want[id]
		slices.SortFunc(have, cmp)
		slices.SortFunc(w, cmp)
		if slices.Equal(have, w) {
			continue
		}
		changed++
		if !write {
			continue
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM crff_rejected WHERE row_id IS ?`, id); err != nil {
			return 0, err
		}
		var add []Rejection
		for _, l := range w {
			add = append(add, Rejection{RowID: id, Column: l.column, Reason: l.reason})
		}
		if err := insertRejected(ctx, tx, run, add); err != nil {
			return 0, err
		}
	}
	return changed, nil
}

// PruneScores deletes, for the current run run, the CATEs and the faults
// of rows that are no longer in the run's table (deleted since they were
// scored), so that crff_cate follows the rows. It returns how many CATEs
// it deleted, and fails with ErrStaleRun when run is not the current run.
// The ATEs are not recomputed; see UpdateLocalATE.
func (s *Site) PruneScores(ctx context.Context, run string) (int, error) {
	return s.deleteScores(ctx, "prune scores in", func(tx *sql.Tx) (func(string) string, error) { return orphanedScores(ctx, tx, run) },
		"crff_cate_rows", "crff_rejected")
}

// deleteScores deletes from each of tables (crff_cate_rows first) the rows
// where returns, within the transaction, for that table, and returns how
// many CATEs it deleted. It looks first, in a read transaction: most polls
// find nothing to delete, and the user's own writers to the file should
// not wait for crffd's write lock every poll.
func (s *Site) deleteScores(ctx context.Context, op string, where func(tx *sql.Tx) (func(table string) string, error), tables ...string) (int, error) {
	var found bool
	err := s.readTx(ctx, op, func(tx *sql.Tx) error {
		cond, err := where(tx)
		if err != nil {
			return err
		}
		var exists []string
		for _, t := range tables {
			exists = append(exists, fmt.Sprintf(`EXISTS (SELECT 1 FROM %s WHERE %s)`, t, cond(t)))
		}
		return tx.QueryRowContext(ctx, `SELECT `+strings.Join(exists, " OR ")).Scan(&found)
	})
	if err != nil || !found {
		return 0, err
	}
	var deleted int64
	err = s.writeTx(ctx, op, func(tx *sql.Tx) error {
		cond, err := where(tx)
		if err != nil {
			return err
		}
		for _, t := range tables {
			res, err := tx.ExecContext(ctx, "DELETE FROM "+t+" WHERE "+cond(t))
			if err != nil {
				return err
			}
			if t == "crff_cate_rows" {
				deleted, _ = res.RowsAffected()
			}
		}
		return nil
	})
	return int(deleted), err
}

// ForgetEdited deletes, for the current run run, the CATEs of rows whose
// treatment, outcome or covariates changed since they were scored (their
// digest differs from the one kept with the CATE), so that
// [Site.UnscoredRows] returns them to be scored again: with new
// covariates for their CATE, with a new treatment or outcome for their
// AIPW score. It returns how many it deleted, and fails with ErrStaleRun
// when run is not the current run. CATEs kept without a digest are left
// alone. The ATEs are not recomputed; see UpdateLocalATE.
func (s *Site) ForgetEdited(ctx context.Context, run string) (int, error) {
	if errDigestFunc != nil {
		return 0, fmt.Errorf("forget edited rows in %q: register %s: %w", s.path, digestFunc, errDigestFunc)
	}
	return s.deleteScores(ctx, "forget edited rows in", func(tx *sql.Tx) (func(string) string, error) {
		cond, err := editedScores(ctx, tx, run)
		return func(string) string { return cond }, err
	}, "crff_cate_rows")
}

// editedScores checks that run is the current run and returns the
// condition that a crff_cate row's treatment, outcome or covariates
// changed since it was scored.
//
// The user's table is the outer loop and crff_cate is searched by its
// primary key, so a poll costs one pass over the table; a condition
// correlated on crff_cate would scan the user's table once per CATE.
func editedScores(ctx context.Context, tx *sql.Tx, run string) (string, error) {
	l, qt, qi, err := currentTable(ctx, tx, run)
	if err != nil {
		return "", err
	}
	// The columns in the order of Records.XDigests: treatment, outcome,
	// covariates.
	var cols []string
	for _, c := range append([]string{l.Treatment, l.Outcome}, l.Covariates...) {
		q, err := sqlfiles.QuoteIdent(c)
		if err != nil {
			return "", err
		}
		cols = append(cols, "u."+q)
	}
	return fmt.Sprintf(`run = %[5]s AND row_id IN (SELECT k.row_id FROM %[1]s AS u CROSS JOIN crff_cate_rows AS k ON k.run = %[5]s AND k.row_id IS +u.%[2]s
		WHERE k.x_digest IS NOT NULL AND %[3]s(%[4]s) IS NOT k.x_digest)`,
		qt, qi, digestFunc, strings.Join(cols, ", "), currentRunSQL), nil
}

// orphanedScores checks that run is the current run and returns, for a
// table of crff_cate's or crff_rejected's kind, the condition that a row's
// row_id is no longer in the run's table. As in editedScores, the user's
// table is the outer loop: the condition keeps the rows it finds there.
func orphanedScores(ctx context.Context, tx *sql.Tx, run string) (func(table string) string, error) {
	_, qt, qi, err := currentTable(ctx, tx, run)
	if err != nil {
		return nil, err
	}
	return func(table string) string {
		if table == "crff_cate_rows" {
			return fmt.Sprintf(`run = %[3]s AND row_id NOT IN (SELECT k.row_id FROM %[1]s AS u CROSS JOIN crff_cate_rows AS k ON k.run = %[3]s AND k.row_id IS +u.%[2]s)`, qt, qi, currentRunSQL)
		}
		return fmt.Sprintf(`rowid NOT IN (SELECT k.rowid FROM %[2]s AS u JOIN %[1]s AS k ON k.row_id IS +u.%[3]s)`, table, qt, qi)
	}, nil
}

// currentRunSQL is the current run's id, in SQL: the conditions of
// editedScores and orphanedScores hold in a transaction that checked it
// is the run they were asked about.
const currentRunSQL = `(SELECT run FROM crff_run WHERE state = 'current')`

// currentTable checks that run is the current run, as requireCurrent
// does, and returns its layout with its table and id column quoted.
func currentTable(ctx context.Context, tx *sql.Tx, run string) (l Layout, table, id string, err error) {
	if err := requireCurrent(ctx, tx, run); err != nil {
		return Layout{}, "", "", err
	}
	r, err := scanRun(tx.QueryRowContext(ctx, runColumns+` WHERE run = ?`, run))
	if err != nil {
		return Layout{}, "", "", fmt.Errorf("run %q: %w", run, err)
	}
	if table, err = sqlfiles.QuoteIdent(r.Layout.Table); err != nil {
		return Layout{}, "", "", err
	}
	if id, err = sqlfiles.QuoteIdent(r.Layout.ID); err != nil {
		return Layout{}, "", "", err
	}
	return r.Layout, table, id, nil
}

// WriteATE sets ATEs of the current run, replacing those of the same scope
// and estimator;
// for example the global ATE, which arrives from the coordinator after the
// site's results are written. It fails with ErrStaleRun when run is not the
// current run.
func (s *Site) WriteATE(ctx context.Context, run string, ates ...ATE) error {
	if err := checkATE(ates); err != nil {
		return fmt.Errorf("write ATE of run %q to %q: %w", run, s.path, err)
	}
	return s.writeTx(ctx, "write ATE to", func(tx *sql.Tx) error {
		if err := requireCurrent(ctx, tx, run); err != nil {
			return err
		}
		return upsertATE(ctx, tx, run, ates)
	})
}

// WriteTransfer replaces the transfer factors of the current run. It fails
// with ErrStaleRun when run is not the current run.
func (s *Site) WriteTransfer(ctx context.Context, run string, ts []Transfer) error {
	if err := checkTransfer(ts); err != nil {
		return fmt.Errorf("write transfer factors of run %q to %q: %w", run, s.path, err)
	}
	return s.writeTx(ctx, "write transfer factors to", func(tx *sql.Tx) error {
		if err := requireCurrent(ctx, tx, run); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM crff_transfer`); err != nil {
			return err
		}
		return insertTransfer(ctx, tx, run, ts)
	})
}

// requireCurrent fails unless run is the current run.
func requireCurrent(ctx context.Context, q querier, run string) error {
	st, err := runState(ctx, q, run)
	if errors.Is(err, ErrNoRun) {
		return fmt.Errorf("%w: %w (replaced by a newer run?)", ErrStaleRun, err)
	}
	if err != nil {
		return err
	}
	if st != RunCurrent {
		return fmt.Errorf("%w: run %q is %s", ErrStaleRun, run, st)
	}
	return nil
}

// cateRowsPerInsert is how many CATEs one INSERT statement writes: a
// statement per row spends more on the driver's call than on SQLite's
// insert (BenchmarkWriteResults).
const cateRowsPerInsert = 256

func insertCATE(ctx context.Context, tx *sql.Tx, run string, cs []CATE, ignoreScored bool) error {
	if len(cs) == 0 {
		return nil
	}
	// The run and the time are the same in every row: literals in the
	// statement, so that a row binds 16 values, not 18 (a fifth faster).
	qrun, err := sqlfiles.QuoteString(run)
	if err != nil {
		return fmt.Errorf("run id: %w", err)
	}
	qat, err := sqlfiles.QuoteString(now())
	if err != nil {
		return err
	}
	values := `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ` + qrun + `, ` + qat + `, ?, ?, ?, ?)`
	prepare := func(rows int) (*sql.Stmt, error) {
		q := `INSERT INTO crff_cate_rows (row_id, cate, se, lower, upper, latent_cate, latent_sd, latent_q025, latent_q975,
	          y0, y1, propensity, run, scored_at, x_digest, raw_cate, psi, psi_clipped)
	      VALUES ` + strings.TrimSuffix(strings.Repeat(values+", ", rows), ", ")
		if ignoreScored {
			q += ` ON CONFLICT (run, row_id) DO NOTHING`
		}
		return tx.PrepareContext(ctx, q)
	}
	return insertRows(ctx, tx, prepare, 16, cateRowsPerInsert, len(cs), func(i int, r []any) error {
		c := cs[i]
		var digest any
		if c.XDigest != nil {
			digest = c.XDigest[:]
		}
		var clipped any
		if !math.IsNaN(c.PSI) {
			clipped = c.PSIClipped
		}
		r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7] = c.RowID, c.CATE, nullable(c.SE), nullable(c.Lower), nullable(c.Upper), c.Latent, c.LatentSD, c.LatentQ025
		r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15] = c.LatentQ975, c.Y0, c.Y1, c.Propensity, digest, nullable(c.Raw), nullable(c.PSI), clipped
		return nil
	}, func(i int) string { return "CATE of row " + cs[i].RowID.String() })
}

// insertRows inserts n rows of width values each, row i made by row into
// a reused slice, per rows to a statement (prepare(k) prepares the INSERT
// of k rows): a statement a row spends more on the driver's call than on
// SQLite's insert. A statement of many rows fails whole; its rows are then
// inserted one at a time, so that the error names the one that fails, as
// what(i) says.
func insertRows(ctx context.Context, tx *sql.Tx, prepare func(rows int) (*sql.Stmt, error), width, per, n int,
	row func(i int, dst []any) error, what func(i int) string) error {
	one, err := prepare(1)
	if err != nil {
		return err
	}
	defer one.Close()
	var many *sql.Stmt
	if per > 1 && n >= per {
		if many, err = prepare(per); err != nil {
			return err
		}
		defer many.Close()
	}
	vals := make([]any, per*width)
	for lo := 0; lo < n; lo += per {
		hi := min(n, lo+per)
		batch := vals[:(hi-lo)*width]
		clear(batch)
		for i := lo; i < hi; i++ {
			if err := row(i, batch[(i-lo)*width:(i-lo+1)*width]); err != nil {
				return fmt.Errorf("%s: %w", what(i), err)
			}
		}
		if hi-lo == per && many != nil {
			if _, err := many.ExecContext(ctx, batch...); err == nil {
				continue
			}
		}
		for i := lo; i < hi; i++ {
			if _, err := one.ExecContext(ctx, batch[(i-lo)*width:(i-lo+1)*width]...); err != nil {
				return fmt.Errorf("%s: %w", what(i), err)
			}
		}
	}
	return nil
}

func upsertATE(ctx context.Context, tx *sql.Tx, run string, as []ATE) error {
	at := now()
	for _, a := range as {
		var clipped, sites any
		if a.Clipped >= 0 {
			clipped = a.Clipped
		}
		if a.Sites != nil {
			b, err := json.Marshal(a.Sites)
			if err != nil {
				return err
			}
			sites = string(b)
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO crff_ate (scope, estimator, ate, se, lower, upper, n, clipped, run, computed_at, sites, private, noise_se)
			 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			 ON CONFLICT (scope, estimator) DO UPDATE SET ate = excluded.ate, se = excluded.se,
			     lower = excluded.lower, upper = excluded.upper, n = excluded.n, clipped = excluded.clipped,
			     run = excluded.run, computed_at = excluded.computed_at, sites = excluded.sites, private = excluded.private,
			     noise_se = excluded.noise_se`,
			string(a.Scope), a.Estimator, a.ATE, nullable(a.SE), nullable(a.Lower), nullable(a.Upper), a.N, clipped, run, at, sites, a.Private,
			a.NoiseSE); err != nil {
			return fmt.Errorf("%s %s ATE: %w", a.Scope, a.Estimator, err)
		}
	}
	return nil
}

func insertSelection(ctx context.Context, tx *sql.Tx, run string, ss []Selection) error {
	at := now()
	for _, c := range ss {
		var kernel, ridge any
		if c.Kernel != "" {
			kernel = c.Kernel
		}
		if c.Ridge > 0 {
			ridge = c.Ridge
		}
		var se, diffSE, shift any = c.SE, c.DiffSE, nil
		if c.Kind == "ensemble" {
			se, diffSE, shift = nil, nil, c.Shift
		}
		var siteDiff, siteSE, own, ownSE any
		if d := c.Site; d != nil {
			siteDiff, siteSE = d.Diff, d.DiffSE
			if d.Own != nil && d.OwnSE != nil {
				own, ownSE = *d.Own, *d.OwnSE
			}
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO crff_model_selection (candidate, kind, kernel, ridge, loss, se, diff, diff_se, chosen, member, shift, n, run, computed_at,
			   site_diff, site_diff_se, own_diff, own_diff_se)
			 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			c.Candidate, c.Kind, kernel, ridge, c.Loss, se, c.Diff, diffSE, c.Chosen, c.Member, shift, c.N, run, at,
			siteDiff, siteSE, own, ownSE); err != nil {
			return fmt.Errorf("model selection candidate %q: %w", c.Candidate, err)
		}
	}
	return nil
}

func insertNuisance(ctx context.Context, tx *sql.Tx, run string, ns []Nuisance) error {
	at := now()
	for _, n := range ns {
		var weight any = n.Weight
		if n.Learner == NuisanceStack {
			weight = nil
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO crff_nuisance (model, learner, weight, loss, n, run, computed_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			n.Model, n.Learner, weight, n.Loss, n.N, run, at); err != nil {
			return fmt.Errorf("nuisance learner %q of the %s: %w", n.Learner, n.Model, err)
		}
	}
	return nil
}

func insertTransfer(ctx context.Context, tx *sql.Tx, run string, ts []Transfer) error {
	for _, t := range ts {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO crff_transfer (peer, model, lambda, run) VALUES (?, ?, ?, ?)`,
			t.Peer, t.Model, t.Lambda, run); err != nil {
			return fmt.Errorf("transfer factor to %q for %q: %w", t.Peer, t.Model, err)
		}
	}
	return nil
}

func insertRejected(ctx context.Context, tx *sql.Tx, run string, rs []Rejection) error {
	if len(rs) == 0 {
		return nil
	}
	st, err := tx.PrepareContext(ctx,
		`INSERT INTO crff_rejected (row_id, column_name, reason, run, rejected_at) VALUES (?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer st.Close()
	at := now()
	for _, r := range rs {
		if _, err := st.ExecContext(ctx, r.RowID, r.Column, r.Reason, run, at); err != nil {
			return fmt.Errorf("rejection of row %s: %w", r.RowID, err)
		}
	}
	return nil
}

// nullable returns v, or nil (SQL NULL) for NaN.
func nullable(v float64) any {
	if math.IsNaN(v) {
		return nil
	}
	return v
}

// CurrentCATERows returns how many rows crff_cate holds: the current run's
// CATEs, which the next publish deletes.
func (s *Site) CurrentCATERows(ctx context.Context) (int, error) {
	var n int
	if err := s.ro.QueryRowContext(ctx, `SELECT count(*) FROM crff_cate_rows WHERE run = `+currentRunSQL).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the CATEs of %q: %w", s.path, err)
	}
	return n, nil
}
