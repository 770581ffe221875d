package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/balance"
	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/modelstore"
	"github.com/crffd/crffd/plugins/transport"
	"github.com/crffd/crffd/selection"
	"github.com/crffd/crffd/store"
)

// runFederatedSite takes part in the federation's runs: it reads and
// validates the site's records, answers the coordinator round by round,
// and publishes each run's results in the site file as crffd fit does,
// with the federation's weights and the global ATE. A run that fails or
// is refused is logged and recorded in crff_run_log, and the site waits
// for the next (with --once it exits with exitRunFailed); only the errors
// of fatalRunError stop it.
func runFederatedSite(cmd *cobra.Command, a *app, once bool) error {
	ctx := cmd.Context()
	if keys := a.ignoredModelKeys(); len(keys) > 0 {
		a.log.Warn("model settings are the coordinator's in a federation; this site's are ignored",
			slog.String("keys", strings.Join(keys, ", ")))
	}
	src, err := a.siteSource()
	if err != nil {
		return withExit(exitConfig, err)
	}
	name := a.v.GetString("site.name")
	if err := wire.CheckName(name); err != nil {
		return withExit(exitConfig, fmt.Errorf("site.name: %w", err))
	}
	minArm := a.v.GetInt("federation.min_arm_rows")
	if minArm < 1 {
		return withExit(exitConfig, fmt.Errorf("federation.min_arm_rows %d: want at least 1", minArm))
	}
	every, err := a.durationSetting("site.poll_interval")
	if err != nil {
		return withExit(exitConfig, err)
	}
	secret := a.v.GetString("federation.secret")
	if secret != "" {
		if err := checkSecret(secret); err != nil {
			return withExit(exitConfig, err)
		}
	} else {
		a.log.Warn("federation.secret is not set: column names are fingerprinted with unkeyed SHA-256, which the coordinator can test guessed names against")
	}
	limits, err := a.siteLimits()
	if err != nil {
		return withExit(exitConfig, err)
	}
	priv, err := a.sitePrivacy()
	if err != nil {
		return withExit(exitConfig, err)
	}
	db, err := a.openSite(ctx, src)
	if err != nil {
		return withExit(exitStorage, err)
	}
	defer db.Close()
	if priv != nil {
		priv.Ledger = storeLedger{db}
	}
	recs, ids, err := readFederated(ctx, a, db, src)
	if err != nil {
		return err
	}
	if err := a.privateColumns(priv, src, recs); err != nil {
		return withExit(exitConfig, err)
	}
	logPrivacy(a, priv)
	// With kernel.name auto the site trains any installed kernel a run
	// names, the Gaussian when it names none; otherwise its one kernel
	// alone.
	kernels, err := a.kernelSettings(ctx)
	if err != nil {
		return withExit(exitConfig, err)
	}
	spectra, err := a.openKernels(ctx, kernels)
	if err != nil {
		return withExit(exitConfig, err)
	}
	kernel := kernels[0]
	spectral := spectra[kernelLabel(kernel)]
	var further func(context.Context, string) (estimator.Spectral, error)
	if a.v.GetString("kernel.name") == "auto" {
		further = installedKernels(spectra)
	}
	client, err := a.openTransport(ctx, transport.RoleSite, name)
	if err != nil {
		return withExit(exitTransport, err)
	}
	defer client.Close()
	metrics := &federation.Metrics{}
	if err := a.serveMetrics(ctx, "site", metrics); err != nil {
		return withExit(exitConfig, err)
	}
	if !once {
		// Rows added between runs are scored with the current run's model,
		// as crffd site does without a federation; the next run trains on
		// them and rescores every row.
		scoreCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		defer func() { stop(); <-done }()
		go func() {
			defer close(done)
			// The runs' kernel plugins serve the scorer too: one process
			// each. The scorer adds to its map, so it has its own.
			scoreBetweenRuns(scoreCtx, a, db, every, maps.Clone(spectra))
		}()
	}
	conn := clientConn{c: client, in: client.Receive(ctx)}
	for {
		var losses []store.Loss // this run's loss history, recorded when it is published
		cfg := federation.SiteConfig{
			Name: name, Coordinator: a.v.GetString("federation.coordinator"),
			Data: recs.Data, Schema: recs.Schema, Columns: recs.Layout.Covariates, ColumnKey: []byte(secret), Identities: ids,
			Spectral: spectral, KernelName: kernelLabel(kernel), Kernels: further, Logger: a.log, Metrics: metrics, MinArmRows: minArm,
			Limits: limits, Privacy: priv,
			// Each run trains on the table as it is when the run begins;
			// Join and Publish see the rows read then.
			Rows: func(ctx context.Context) (federation.SiteRows, error) {
				r, i, err := readFederated(ctx, a, db, src)
				if err != nil {
					return federation.SiteRows{}, err
				}
				recs, ids = r, i
				return federation.SiteRows{Data: r.Data, Schema: r.Schema, Columns: r.Layout.Covariates, Identities: i}, nil
			},
			Join: joinRun(a, db, name, func() *store.Records { return recs }, minArm),
			Audit: func(ctx context.Context, d federation.Direction, e *wire.Envelope) error {
				return storageError(db.AppendAudit(ctx, auditEntry(d, e)))
			},
			Loss: func(model string, round int, loss float64) {
				losses = append(losses, store.Loss{Model: model, Round: round, Loss: loss})
			},
			Publish: func(ctx context.Context, r *federation.SiteResult) error {
				if err := publishFederated(ctx, a, db, recs, kernels, r); err != nil {
					return err
				}
				// The loss history is a diagnostic: failing to keep it
				// does not fail the run.
				if err := db.AppendLoss(ctx, r.RunID, finiteLosses(losses)...); err != nil {
					a.log.Warn("loss history not recorded", slog.String(logKeyRun, r.RunID), slog.String(logKeyError, err.Error()))
				}
				return nil
			},
		}
		a.log.Info("site waiting for the coordinator", slog.String(logKeyName, name), slog.String(logKeyDB, src.DB), slog.Int(logKeyRows, recs.Len()))
		r, err := federation.RunSite(ctx, cfg, conn)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			if fatal := fatalRunError(err); fatal != nil {
				return fatal
			}
			if err := logSiteRun(ctx, a, db, err); err != nil {
				return err
			}
			if once {
				return withExit(exitRunFailed, err)
			}
			continue
		}
		if err := logSiteRun(ctx, a, db, nil, r.RunID); err != nil {
			return err
		}
		if _, err := fmt.Fprintf(a.stdout, "run %s: %d rows scored\n", r.RunID, len(r.CATE)); err != nil {
			return err
		}
		if sel := r.Selection; sel != nil {
			if err := printSelection(a.stdout, sel.Candidates, sel.Chosen, sel.HeldAll, math.NaN(), []float64{sel.Estimator.Shift}); err != nil {
				return err
			}
		}
		if err := printATEs(a.stdout, store.ScopeLocal, r.Local); err != nil {
			return err
		}
		if err := printATEs(a.stdout, store.ScopeGlobal, r.Global); err != nil {
			return err
		}
		if once {
			return nil
		}
	}
}

// logSiteRun logs how a run ended with err (nil: completed) and records it
// in crff_run_log: the run of a *federation.RunError, or run. A failure
// with no run (before any hello) is only logged. A run log that cannot be
// written is a storage failure.
func logSiteRun(ctx context.Context, a *app, db *store.Site, err error, run ...string) error {
	id := ""
	if len(run) > 0 {
		id = run[0]
	}
	var re *federation.RunError
	if errors.As(err, &re) {
		id = re.RunID
	}
	end := federation.EndOf(id, err)
	if err != nil {
		a.log.Error("run ended without results; waiting for the coordinator's next run",
			slog.String(logKeyRun, id), slog.String(logKeyStatus, string(end.Status)), slog.String(logKeyError, err.Error()))
	}
	if id == "" {
		return nil
	}
	return withExit(exitStorage, storageError(db.LogRun(ctx, store.RunEnd{Run: id, Status: store.RunStatus(end.Status), Reason: end.Reason})))
}

// readFederated reads and validates the site's records and hashes their
// identities, for the next run.
func readFederated(ctx context.Context, a *app, db *store.Site, src store.Source) (*store.Records, []wire.Digest, error) {
	recs, err := db.ReadRecords(ctx, src)
	if err != nil {
		return nil, nil, err
	}
	if recs.Len() == 0 {
		return nil, nil, fmt.Errorf("site %s: no valid rows to train on", src.DB)
	}
	warnUnused(a, src, recs)
	if len(recs.Rejected) > 0 {
		a.log.Warn("rows left out (on_invalid: skip); see crff_rejected", slog.String(logKeyDB, src.DB), slog.Int(logKeyRows, len(recs.Rejected)))
	}
	ids, err := identityHashes(ctx, a, db, recs)
	if err != nil {
		return nil, nil, err
	}
	return recs, ids, nil
}

// joinRun returns the federation.SiteConfig.Join hook of a site taking
// part in runs with the rows recs returns (those of the run at hand). It
// records the run's rows in the site file (store.Site.JoinRun), refusing a
// run whose rows differ from those of an earlier run by at least one and
// fewer than least rows, since the difference of the two runs' sums would
// come that close to single records, and a rejoined run whose rows are not
// those it began with. It is called before the site answers the run's
// hello, so a refused run has sent nothing computed from the rows and
// leaves no record. A refusal's error also matches the federation sentinel
// of the same rule (sameRule), so that the site tells the coordinator why
// it refuses the run; other errors stop the site without a word.
func joinRun(a *app, db *store.Site, name string, recs func() *store.Records, least int) func(context.Context, string) error {
	return func(ctx context.Context, run string) error {
		err := db.JoinRun(ctx, name, run, recs(), least)
		var ce *store.RowChangeError
		switch {
		case errors.As(err, &ce):
			a.log.Error("run refused: the site's rows differ too little from an earlier run's",
				slog.String(logKeyName, name), slog.String(logKeyRun, run), slog.String(logKeyEarlierRun, ce.Run),
				slog.Int(logKeyChanged, ce.Total()), slog.Int(logKeyLeast, least))
			return sameRule{err, federation.ErrTooFewChanged}
		case errors.Is(err, store.ErrRunRowsChanged):
			a.log.Error("run refused: the site's rows changed since it began the run",
				slog.String(logKeyName, name), slog.String(logKeyRun, run))
			return sameRule{err, federation.ErrRowsChanged}
		}
		return err
	}
}

// sameRule is a store refusal that also matches the federation sentinel
// naming the same rule: store does not import federation, so the site
// daemon, which imports both, states that the one is the other. Its
// message is the store error's.
type sameRule struct{ err, rule error }

func (e sameRule) Error() string { return e.err.Error() }

// Unwrap returns the store error and the federation sentinel.
func (e sameRule) Unwrap() []error { return []error{e.err, e.rule} }

// auditEntry describes an envelope for crff_audit, without its values.
func auditEntry(d federation.Direction, e *wire.Envelope) store.AuditEntry {
	dir, peer := store.Received, e.Sender
	if d == federation.Sent {
		dir, peer = store.Sent, e.Recipient
	}
	ts := make([]store.TensorInfo, 0, len(e.Tensors()))
	for _, t := range e.Tensors() {
		ts = append(ts, store.TensorInfo{Name: t.Name, Shape: t.Shape})
	}
	for _, l := range e.DigestLists() {
		ts = append(ts, store.TensorInfo{Name: l.Name, Shape: []int{len(l.Digests), wire.DigestSize}})
	}
	return store.AuditEntry{Direction: dir, Peer: peer, Kind: e.Kind.String(), Run: e.RunID, Model: e.Model,
		Round: int(e.Round), Tensors: ts, Bytes: e.PayloadBytes(), Digest: e.PayloadDigest().String()}
}

// installedKernels is a SiteConfig.Kernels that opens the kernels of
// spectra (by kernelLabel), the plugins a site with kernel.name auto has
// open.
func installedKernels(spectra map[string]estimator.Spectral) func(context.Context, string) (estimator.Spectral, error) {
	return func(_ context.Context, name string) (estimator.Spectral, error) {
		if sp, ok := spectra[name]; ok {
			return sp, nil
		}
		return nil, fmt.Errorf("no installed kernel plugin at %q (this site has %s)", name, strings.Join(slices.Sorted(maps.Keys(spectra)), ", "))
	}
}

// publishFederated writes a run's model and results, as crffd fit does.
// kernels are the site's kernels, among them those the run trained
// (r.Kernels, by kernelLabel).
// A run published already (the coordinator restarted after the site
// published but before it heard the site's done) is left as it is: its
// results are a deterministic function of the run.
func publishFederated(ctx context.Context, a *app, db *store.Site, recs *store.Records, kernels []modelstore.Kernel, r *federation.SiteResult) error {
	if cur, err := db.CurrentRun(ctx); err == nil && cur.ID == r.RunID {
		a.log.Info("run published already", slog.String(logKeyRun, r.RunID))
		return nil
	}
	if err := db.BeginRun(ctx, r.RunID, recs.Layout); err != nil {
		return err
	}
	rounds := map[string]int{}
	for k, n := range r.Rounds {
		rounds[k.String()] = n
	}
	est := selection.Estimator{Kind: selection.KindLatent}
	if r.Selection != nil {
		est = r.Selection.Estimator
	}
	est, used := keptModels(est)
	own, err := runKernel(kernels, r.Kernels[0])
	if err != nil {
		return err
	}
	var extra []*estimator.Model
	var extraKernels []modelstore.Kernel
	for _, k := range used {
		mk, err := runKernel(kernels, r.Kernels[k])
		if err != nil {
			return err
		}
		extra, extraKernels = append(extra, r.Models[k]), append(extraKernels, mk)
	}
	setup := modelstore.Setup{Kernel: own, Config: r.Setup.Config, Scaler: r.Setup.Scaler, Schema: recs.Schema,
		Calibration: calibrationParams(r.Calibration), Estimator: &est, Extra: extraKernels,
		Site: r.Index, Sites: r.Sites, Rounds: rounds}
	if err := modelstore.Save(ctx, db, r.RunID, setup, r.Models[0], extra...); err != nil {
		return err
	}
	cates, err := cateRows(recs, r.Effects, r.CATE, rowScores{r.Scores, r.ScoreClipped}, r.Calibration)
	if err != nil {
		return err
	}
	warnUncalibrated(a, store.Source{DB: db.Path()}, len(r.Kept), r.Calibration)
	global := storeATEs(store.ScopeGlobal, r.Global)
	for i := range global {
		// The run's sites: with coordinator.min_sites, perhaps fewer than
		// the coordinator lists.
		global[i].Sites = runSites(r)
		global[i].Private = r.PrivateSites > 0
	}
	local := storeATEs(store.ScopeLocal, r.Local)
	for i := range local {
		local[i].Private = r.Private
	}
	if r.PrivateSites > 0 {
		a.log.Info("the run's global AIPW interval includes the noise its private sites added to their sums (crff_ate.noise_se), not the bias of their clipping, nor the training noise's effect on the models; crff_ate marks it private",
			slog.Int(logKeySites, r.PrivateSites), slog.Float64(logKeyNoiseSE, r.Global.AIPW.NoiseSE))
	}
	if rel := r.Released; rel != nil {
		a.log.Info("the ATE's sums were released with noise; the local crff_ate rows are this site's exact ones",
			slog.Float64(logKeyPsiClip, rel.PsiClip), slog.Int(logKeyPsiClipped, rel.PsiClipped), slog.Float64(logKeyCATEClip, rel.CATEClip),
			slog.Int(logKeyCATEClipped, rel.CATEClipped), slog.Float64(logKeyNoiseSD, rel.NoiseSD[0]), slog.Int(logKeyRows, rel.Sums.N))
	}
	res := store.Results{
		CATE:     cates,
		ATE:      append(local, global...),
		Rejected: recs.Rejected,
	}
	if sel := r.Selection; sel != nil {
		res.Selection = selectionRows(sel.Candidates, func(k int) string { return r.Kernels[k] }, sel.HeldAll)
	}
	for _, k := range estimator.Kinds {
		for v, l := range r.Lambda[k] {
			if v != r.Index {
				// Peers are named by their position in the coordinator's
				// coordinator.sites list: site names never reach a site.
				peer := fmt.Sprintf("#%d", v+1) // a coordinator that does not name the sites
				if v < len(r.Peers) && r.Peers[v] != "" {
					peer = r.Peers[v]
				}
				res.Transfer = append(res.Transfer, store.Transfer{Peer: peer, Model: k.String(), Lambda: l})
			}
		}
	}
	if err := db.WriteResults(ctx, r.RunID, res); err != nil {
		return err
	}
	a.log.Info("published federated results", slog.String(logKeyRun, r.RunID), slog.Int(logKeyRows, len(res.CATE)))
	// The balance diagnostics do not fail a published run.
	if err := publishBalance(ctx, db, recs, r); err != nil {
		a.log.Warn("balance diagnostics not recorded", slog.String(logKeyRun, r.RunID), slog.String(logKeyError, err.Error()))
	}
	return nil
}

// publishBalance records the balance of the site's rows of run r (scope
// local) and, when every site sent its sums, of all the sites' rows (scope
// global) in crff_balance.
func publishBalance(ctx context.Context, db *store.Site, recs *store.Records, r *federation.SiteResult) error {
	// The sums of the site's hello, when it sent them, are of the same
	// rows: no second propensity fit.
	if _, err := checkBalance(ctx, db, recs, r.LocalBalance); err != nil {
		return err
	}
	if r.Balance == nil {
		return nil
	}
	l := recs.Layout
	g, err := balance.Summarise(*r.Balance, l.Covariates, l.Binary, l.Treatment)
	if err != nil {
		return err
	}
	return db.WriteBalance(ctx, store.Balance{Scope: store.ScopeGlobal, At: time.Now(), Run: r.RunID, Sites: r.Sites, LeftOut: -1, Report: g})
}

// runSites returns the names of the sites of r's run, or nil when the
// coordinator did not name them all.
func runSites(r *federation.SiteResult) []string {
	if len(r.Peers) != r.Sites || slices.Contains(r.Peers, "") {
		return nil
	}
	return slices.Clone(r.Peers)
}

// identityHashes returns the HMAC of every kept row's identity columns, or
// nil when de-duplication is not configured.
func identityHashes(ctx context.Context, a *app, db *store.Site, recs *store.Records) ([]wire.Digest, error) {
	secret := a.v.GetString("federation.secret")
	cols := recs.Layout.Identity
	switch {
	case len(cols) == 0 && secret == "":
		a.log.Info("no identity columns configured: this site's rows are not de-duplicated")
		return nil, nil
	case len(cols) == 0:
		a.log.Info("no identity columns configured: this site's rows are not de-duplicated")
		return nil, nil
	case secret == "":
		return nil, errors.New("site.identity_columns is set but federation.secret is empty: set the sites' shared secret (CRFFD_FEDERATION_SECRET)")
	}
	byID, err := db.ReadIdentities(ctx, recs.Layout)
	if err != nil {
		return nil, err
	}
	out := make([]wire.Digest, len(recs.IDs))
	incomplete := 0
	for i, id := range recs.IDs {
		v, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("identity columns of row %v: row vanished while reading", id)
		}
		if !federation.IdentityComplete(v) {
			incomplete++
		}
		out[i] = federation.IdentityHMAC([]byte(secret), v)
	}
	if incomplete > 0 {
		a.log.Warn("rows with an empty identity column are never taken for duplicates",
			logKeyRows, incomplete, logKeyTotal, len(recs.IDs))
	}
	return out, nil
}

// finiteLosses drops the losses that are not finite numbers, which
// crff_loss does not hold.
func finiteLosses(ls []store.Loss) []store.Loss {
	out := ls[:0:0]
	for _, l := range ls {
		if !math.IsNaN(l.Loss) && !math.IsInf(l.Loss, 0) && l.Round >= 0 {
			out = append(out, l)
		}
	}
	return out
}

// keptModels returns the estimator est as the site keeps it with the run's
// own kernel's model and the further kernels' its members need: those
// kernels' indices in the run (used, increasing, none 0), and est with its
// members' kernels renumbered to match, the run's own 0 and used[j] j+1,
// as modelstore.LoadAll numbers the models.
func keptModels(est selection.Estimator) (selection.Estimator, []int) {
	if est.Kind != selection.KindEnsemble {
		return est, nil
	}
	var used []int
	for _, k := range est.Kernels() {
		if k != 0 {
			used = append(used, k)
		}
	}
	est.Members = slices.Clone(est.Members)
	for j, m := range est.Members {
		if m.Kernel != 0 {
			est.Members[j].Kernel = slices.Index(used, m.Kernel) + 1
		}
	}
	return est, used
}

// runKernel returns the kernel of kernels whose label is name.
func runKernel(kernels []modelstore.Kernel, name string) (modelstore.Kernel, error) {
	for _, k := range kernels {
		if kernelLabel(k) == name {
			return k, nil
		}
	}
	return modelstore.Kernel{}, fmt.Errorf("the run chose a model of kernel %q, which this site does not have", name)
}
