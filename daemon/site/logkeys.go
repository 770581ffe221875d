package site

// Log keys of the site daemon's log lines, those of crffd's other lines
// on the same subjects, fixed so that logs can be searched.
const (
	logKeyDB         = "db"
	logKeyRows       = "rows"
	logKeyTotal      = "total"
	logKeyRejected   = "rejected"
	logKeyRun        = "run"
	logKeyInterval   = "interval"
	logKeyError      = "error"
	logKeyName       = "name"
	logKeySites      = "sites"
	logKeyStatus     = "status"      // how a run ended: completed, refused or failed
	logKeyEarlierRun = "earlier_run" // a refused run: the earlier run its rows are compared with,
	logKeyChanged    = "changed"     // how many rows differ
	logKeyLeast      = "least"       // and the fewest allowed (counts, never values)
	logKeyColumn     = "column"
	// A private site: the aggregates it releases exactly, and of the
	// ATE's sums it releases with noise, the clip bounds, how many rows
	// they clipped (counts, never values) and the noise.
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
