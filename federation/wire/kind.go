package wire

import (
	"fmt"

	"github.com/crffd/crffd/federation/wire/wirepb"
)

// Kind says what an envelope is for.
type Kind int32

// The kinds of docs/protocol.md. Any other value is unknown: it decodes but is
// refused by validation.
const (
	KindUnspecified  Kind = Kind(wirepb.Kind_KIND_UNSPECIFIED)
	KindHello        Kind = Kind(wirepb.Kind_KIND_HELLO)         // schema fingerprint
	KindDedupHashes  Kind = Kind(wirepb.Kind_KIND_DEDUP_HASHES)  // HMACs of identity columns
	KindDedupVerdict Kind = Kind(wirepb.Kind_KIND_DEDUP_VERDICT) // rows to leave out
	KindWeights      Kind = Kind(wirepb.Kind_KIND_WEIGHTS)       // effective weights for a site
	KindGradient     Kind = Kind(wirepb.Kind_KIND_GRADIENT)      // a site's gradients
	KindATE          Kind = Kind(wirepb.Kind_KIND_ATE)           // a site's local ATE
	KindGlobalATE    Kind = Kind(wirepb.Kind_KIND_GLOBAL_ATE)    // the global ATE
	KindDone         Kind = Kind(wirepb.Kind_KIND_DONE)          // end of a run
	KindStats        Kind = Kind(wirepb.Kind_KIND_STATS)         // a site's ridge statistics (model selection)
	KindLosses       Kind = Kind(wirepb.Kind_KIND_LOSSES)        // a site's validation loss sums (model selection)
)

var kindNames = map[Kind]string{
	KindHello:        "hello",
	KindDedupHashes:  "dedup-hashes",
	KindDedupVerdict: "dedup-verdict",
	KindWeights:      "weights",
	KindGradient:     "gradient",
	KindATE:          "ate",
	KindGlobalATE:    "global-ate",
	KindDone:         "done",
	KindStats:        "stats",
	KindLosses:       "losses",
}

// Kinds lists the known kinds in protocol order.
func Kinds() []Kind {
	return []Kind{KindHello, KindDedupHashes, KindDedupVerdict, KindWeights, KindGradient, KindStats, KindLosses, KindATE, KindGlobalATE, KindDone}
}

// String returns the kind's name as in docs/protocol.md ("dedup-hashes"), or
// "kind(N)" for an unknown value.
func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("kind(%d)", int32(k))
}

// Known reports whether k is one of Kinds.
func (k Kind) Known() bool {
	_, ok := kindNames[k]
	return ok
}

// allowsDigests reports whether envelopes of kind k may carry digest lists.
func (k Kind) allowsDigests() bool { return k == KindHello || k == KindDedupHashes }

// ParseKind returns the kind named s, as returned by String.
func ParseKind(s string) (Kind, error) {
	for k, name := range kindNames {
		if name == s {
			return k, nil
		}
	}
	return KindUnspecified, fmt.Errorf("wire: kind %q: %w", s, ErrKind)
}
