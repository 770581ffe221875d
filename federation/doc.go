// Package federation implements the round protocol of DESIGN.md §4: the
// coordinator and site roles of a crffd federation, as state machines over an
// abstract message channel (Conn), so that they run the same over a transport
// plugin and over the in-memory network of tests (federationtest.MemNetwork).
//
// # A run
//
// The coordinator drives every step; a site only answers. Steps are numbered
// on one counter per run (wire.Header.Round), and every answer carries the
// step it answers:
//
//  1. hello (coordinator → site): the model configuration as named scalars,
//     the site's index and the number of sites. The site answers with hello
//     (its schema fingerprint: per covariate, the HMAC-SHA256 of the column
//     name and type flags under the sites' secret, SiteConfig.ColumnKey, or
//     their SHA-256 without one; its row count and Moments — counts, column
//     sums and sums of squares, the aggregates of the pooled standardisation
//     — and the SHA-256 of the base frequencies its kernel plugin draws for
//     that configuration)
//     and dedup-hashes (HMAC-SHA256 of its normalised identity columns under
//     the sites' secret, or none when no identity columns are configured).
//     A site whose schema or frequencies differ from the federation's is
//     refused with a done envelope naming the column.
//  2. dedup-verdict (coordinator → site): the positions of the site's rows to
//     leave out (default policy: keep the copy of the site listed first) and
//     the pooled standardisation. The rows it keeps are fixed for the run: a
//     site refuses a later verdict of the run that keeps other rows, and any
//     verdict that leaves out rows of a site that sent no identity hashes.
//  3. training, model by model (estimator.Kinds): weights (W_c^s and the
//     shared parameters) down, gradient (G_c^s, shared gradients, loss, rows)
//     up, one step per round, with (*estimator.Coordinator).Update and
//     (*estimator.Site).Compute unchanged, so the model equals the simulated
//     federation's (estimator.Train) bit for bit.
//  4. weights with no model: every model's final effective weights of the
//     site and its row of the transfer matrix Λ. The site scores its rows and
//     answers ate (local ATE, standard error, n over its kept rows).
//     With model selection (CoordinatorConfig.Selection) two steps come
//     first, each with the final weights too, so that a site restarted in
//     them can answer: the site answers stats (selection.SiteStats of its
//     training rows), the coordinator pools them into the ridge candidates
//     and sends them, and the site answers losses (selection.SiteLosses:
//     the pair sums of its held-out rows and the centring sums of all its
//     rows). The coordinator forms the ensemble (selection.Decide), and the
//     ate step's weights carry its members, the receiving site's shift and
//     every candidate's scores; the site then scores its rows with the
//     ensemble. The hello carries the held-out share,
//     which each site echoes, and each site holds its rows out with
//     selection.SiteHoldout after de-duplication and trains on the rest.
//     A selection may choose among kernels (CoordinatorConfig.Extra): the
//     hello names the further kernels, each site answers with every
//     kernel's frequency fingerprint, step 3 trains each further kernel's
//     three models after the run's own (envelope models latent.1, …),
//     the final weights carry every kernel's, and every kernel's latent
//     and outcome models are candidates. A site opts in with
//     SiteConfig.Kernels and bounds the kernels with Limits.Kernels.
//  5. global-ate: the n-weighted global ATE. The site publishes its results
//     (Site.Publish) and answers done.
//
// Every envelope is built from named tensors only (package wire). Envelopes
// of another run or a past step, duplicates and unexpected kinds are dropped
// and logged; a duplicate of the current step is answered again, since steps
// are idempotent. A site silent past the round timeout is sent the step
// again; when the retries run out the run stops with an error naming it.
//
// # Refusals
//
// A site refuses a run, before it sends anything computed from its rows,
// when an arm of its table has fewer rows than SiteConfig.MinArmRows, in
// answer to the run's hello, or once de-duplication leaves it so, on the
// dedup-verdict (ErrTooFewRows); when SiteConfig.Join refuses it with an
// error wrapping ErrTooFewChanged (crffd site: its rows differ from an
// earlier run's by 1 to min_arm_rows−1 rows); and when it rejoins with
// another row count (ErrRowsChanged, below). It then sends the coordinator
// one done with status -1 and the scalar "refusal.reason", a code for one of
// those three reasons and nothing else, audited like every envelope it
// sends, and RunSite returns its error. The coordinator stops the run as
// soon as such a done arrives, at whatever step of the run it answers, with
// ErrSiteRefused naming the site and the reason, and tells the other sites
// the run is aborted. Any other failure of a site, a Join error among them,
// sends nothing: the coordinator waits out its retries and stops with
// ErrSilent, as it does for a site that predates refusals. A coordinator
// that predates them drops a refusal as an unexpected done, except at the
// global-ate step (a site rejoining there with another row count), where it
// takes a done of any status for the site's confirmation.
//
// # Counts from peers
//
// Every count an envelope or a checkpoint carries that sizes an
// allocation or a loop is checked before anything is allocated for it.
// A site checks a run's hello against its Limits: the configuration's
// sizes, the site count (Limits.Sites), the kernels (Limits.Kernels), and
// later model selection's candidates (Limits.Candidates) and an ensemble's
// members; it refuses with ErrLimit, and the reason code tells the
// coordinator, or with ErrProtocol for a verdict that leaves out more rows
// than it has or a weight block of the wrong shape. The errors name the
// count and the limit. A coordinator refuses a site whose hello has more
// than MaxCovariates covariates, and whose answers count more rows than
// the site kept (a gradient's rows set how many rounds a model with
// mini-batches trains) or hold statistics of another feature count, with a
// SitesError naming it; it checks a checkpoint's sites, covariates, sizes
// and indices before it resumes. Package wire bounds every envelope
// (wire.MaxEnvelopeBytes, wire.MaxTensors) and refuses values that are
// not finite. FuzzSite and FuzzCoordinator drive both roles with hostile
// envelopes.
//
// # Crashes
//
// The coordinator saves a State (what the handshake agreed, the finished
// models and the estimator.Checkpoint of the model in training) through a
// Checkpointer — coordstore.DB, its own SQLite file — every CheckpointEvery
// rounds and after every model. Restarted, it resumes the run at a step number past
// any it may have sent before it stopped, so the sites take the resumed steps
// as new; since estimator.ResumeCoordinator continues bit-identically, the
// model is the uninterrupted run's.
//
// In steps 4 and 5 it saves the local ATEs once every site's is in, and each
// site's done as it arrives (State.Finish). Resumed there, it recomputes the
// same global ATE from the saved ones, sends it only to the sites that have
// not confirmed the run and waits for them alone: a site started with --once
// leaves after its done. A done that arrives but is not saved before the
// coordinator stops is lost, and a site that left after sending it stays
// silent to the resumed coordinator.
//
// A site restarted mid-run knows nothing of the run: to any envelope of an
// unknown run it answers with a hello carrying the scalar "rejoin", and the
// coordinator sends it its hello and dedup-verdict again at the current step,
// followed by the step's envelope. The scalar's value is a random number
// drawn once per process: a site restarted twice within one step would
// otherwise ask in the very words of its previous process, and the
// coordinator would drop the request as a duplicate. At the global-ate step
// (5) the final weights of step 4 come before it, since the site needs its
// scores to publish: it answers ate again, which the coordinator checks
// against the local ATE it recorded (logging a difference) and does not
// use, and then done. A site's computation is a pure function of its rows
// and the envelopes, so the run continues unchanged if its rows are those
// it began the run with.
//
// The hello a rejoining site is sent therefore names its row count when the
// run began (the moments.n of its first hello). A site that now has another
// count refuses the run with ErrRowsChanged before it sends anything computed
// from its rows, and the run stops with ErrSiteRefused naming it; one that
// has as many answers the hello with nothing, since the coordinator has no
// use for new moments and hashes. The count sees rows added or deleted, not
// rows edited or replaced with the count unchanged; crffd site also calls
// SiteConfig.Join on the rejoin's hello, and its store.Site.JoinRun refuses
// a run whose rows are not exactly those recorded when the site began it
// (store.ErrRunRowsChanged, which matches ErrRowsChanged).
//
// # What crosses the wire
//
// With model selection, a site also sends the ridge statistics of its
// training rows on the outcome model's random features: per arm, n, Σφ,
// Σy, ΦᵀΦ and Φᵀy, and the same for its cross-fitted pseudo-outcomes; and,
// per candidate, n, Σl, Σl², Σd and Σd² of its held-out rows' losses. The
// training part keeps MinArmRows rows in each arm and the held-out part
// twice as many rows, or the site holds none out.
//
// Besides weights and gradients, hello carries per-site aggregates: the row
// count and, per covariate and the outcome, the column sum and sum of
// squares (estimator.Moments), from which the coordinator pools the
// standardisation it sends back in dedup-verdict. Column names travel only
// as HMACs under the sites' secret (SHA-256 digests when a site has none),
// identities only as HMACs under the same secret, and
// the kernel only as the SHA-256 of its base frequencies. The moments are
// taken over all of a site's rows, before de-duplication. A site that is
// not private (SiteConfig.Privacy), or that names balance in
// SitePrivacy.Exact, also sends its balance sums (package balance: per
// arm, the row count and per covariate Σx, Σx² and the
// inverse-propensity-weighted Σωx, with Σω and Σω²), over the same rows;
// the coordinator adds them and sends the total back in global-ate, where
// each site reads the global balance with its own covariate names. The
// log-outcome
// moments are sent only when every one of the site's outcomes is positive,
// and zeros otherwise: over the positive rows alone they could be sums of
// one or two outcomes, which min_arm_rows does not bound.
//
// A private site (SitePrivacy) sends the moments and the ATE's sums with
// Gaussian noise, unless SitePrivacy.Exact names them: each value clipped
// to a public bound first (SitePrivacy.Bounds, PsiClip), the noise
// calibrated to the resulting sensitivity and charged with the training
// rounds before the site answers the hello; the ate envelope then carries
// the noise's standard deviations, and the global AIPW standard error
// includes them. privacy_aggregates.go gives each mechanism.
//
// A site that takes part in several runs sends sums over each run's rows,
// and the difference of two runs' sums is the sum over the rows added,
// deleted or edited in between: over one row, that row's values.
// SiteConfig.Join is called with the run's id before the site answers its
// hello; crffd site refuses there a run whose rows differ from those of any
// earlier run it took part in by at least one and fewer than min_arm_rows
// rows (see Refusals). That bounds differences of two runs only: combinations of three or
// more runs can still single out a row, which only noise or secure
// aggregation would prevent.
package federation
