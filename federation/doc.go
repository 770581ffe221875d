// Package federation implements the round protocol of a crffd federation:
// the coordinator and site roles, as state machines over an abstract message
// channel (Conn), so that they run the same over a transport plugin and over
// the in-memory network of tests. docs/protocol.md in the repository walks
// through a run step by step; this comment states the contract.
//
// The coordinator drives every step and a site only answers: hello and
// de-duplication, training model by model (weights down, gradients up, with
// (*estimator.Coordinator).Update and (*estimator.Site).Compute unchanged, so
// that the model equals the simulated federation's, estimator.Train, bit for
// bit), model selection when configured, the local ATEs, and the global ATE.
// Steps are numbered on one counter per run (wire.Header.Round) and are
// idempotent: envelopes of another run or a past step, duplicates and
// unexpected kinds are dropped and logged, and a duplicate of the current
// step is answered again.
//
// What the roles guarantee:
//
//   - Every envelope is built from named tensors and digests only (package
//     wire); no row value is ever put into one. What a site sends is listed
//     under "What crosses the wire" in docs/protocol.md.
//   - A site refuses a run before it sends anything computed from its rows
//     when an arm holds fewer than SiteConfig.MinArmRows rows, when
//     SiteConfig.Join refuses it, when it rejoins with another row count
//     (ErrRowsChanged), or when the run exceeds its Limits (ErrLimit). It
//     tells the coordinator only a reason code, and the coordinator stops
//     the run with ErrSiteRefused naming the site.
//   - Every count an envelope or a checkpoint carries that sizes an
//     allocation or a loop is checked before anything is allocated for it.
//   - A site silent past the round timeout is sent the step again; when the
//     retries run out the run stops with ErrSilent naming it.
//   - The coordinator checkpoints its State through a Checkpointer and
//     resumes an interrupted run bit-identically; a site restarted mid-run
//     rejoins and continues unchanged if its rows are those it began with.
//   - A private site (SiteConfig.Privacy) noises every aggregate it sends
//     unless SitePrivacy.Exact names it, and charges its budget before it
//     computes anything for the run.
package federation
