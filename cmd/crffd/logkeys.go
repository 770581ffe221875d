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
	logKeyDB    = "db"
	logKeyRows  = "rows"
	logKeyRun   = "run"
	logKeyError = "error"
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
	// Totals of one run at the coordinator.
	logKeyRoundSeconds  = "round_seconds"
	logKeyBytesSent     = "payload_bytes_sent"
	logKeyBytesReceived = "payload_bytes_received"
)

// Log keys of the checks of a site's records before training: a
// treatment arm with few rows, and the fewest it should have (counts,
// never values).
const (
	logKeyArm   = "arm"
	logKeyLeast = "least"
)
