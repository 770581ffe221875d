package main

// Log keys of crffd's own log lines, fixed so that logs can be searched.
const (
	logKeyDone      = "done"
	logKeyTotal     = "total"
	logKeyReplicate = "replicate"
	logKeyMode      = "mode"
	logKeySources   = "sources"
	logKeySeed      = "seed"
	logKeySeconds   = "seconds"
	logKeyRounds    = "rounds"
)

// Log keys of the site commands.
const (
	logKeyDB       = "db"
	logKeyRows     = "rows"
	logKeyRejected = "rejected"
	logKeyRun      = "run"
	logKeyInterval = "interval"
	logKeyError    = "error"
)

// Log keys of the federation daemons.
const (
	logKeyAddress   = "address"
	logKeyName      = "name"
	logKeySites     = "sites"
	logKeyATE       = "ate"        // the AIPW ATE
	logKeySE        = "ate_se"     // its standard error
	logKeyPlugInATE = "plugin_ate" // the mean of the chosen estimator's CATEs
	logKeyStatus    = "status"     // how a run ended: completed, refused or failed
	logKeyRetryIn   = "retry_in"   // how long until the coordinator's next attempt
	logKeyWithout   = "without"    // the listed sites a run goes on without
	logKeyMinSites  = "min_sites"
	// A run a site refused: the earlier run its rows are compared with,
	// how many rows differ and the fewest allowed (counts, never values).
	logKeyEarlierRun = "earlier_run"
	logKeyChanged    = "changed"
	logKeyLeast      = "least"
)

// Log keys of the checks of a site's records before and after training:
// a column left out of the covariates and why, and a treatment arm with
// few rows (counts, never values).
const (
	logKeyColumn = "column"
	logKeyReason = "reason"
	logKeyArm    = "arm"
)

// Log keys of a private site: the aggregates it releases exactly, and of
// the ATE's sums it releases with noise, the clip bounds, how many rows
// they clipped (counts, never values) and the noise.
const (
	logKeyExact       = "exact"
	logKeyNoised      = "noised"
	logKeyWithheld    = "withheld"
	logKeyRelation    = "relation"
	logKeyPsiClip     = "psi_clip"
	logKeyPsiClipped  = "psi_clipped"
	logKeyCATEClip    = "cate_clip"
	logKeyCATEClipped = "cate_clipped"
	logKeyNoiseSD     = "noise_sd"
	logKeyNoiseSE     = "noise_se"
)
