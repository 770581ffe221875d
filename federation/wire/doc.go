// Package wire defines the envelope, the only message that crosses the wire
// between crffd daemons (docs/protocol.md), and the checks every daemon applies
// to it.
//
// # Envelopes
//
// An Envelope has a Header (run id, model, round, kind, sender, recipient)
// and a payload built only from named tensors: a Tensor is a name, a shape
// and finite float64 values in row-major order, so a payload is a table of
// parameters or gradients. Row values never go into an envelope; nothing in
// this package can carry free-form bytes or strings other than names.
//
// Two kinds also carry digest lists: a DigestList is a name and a list of
// 32-byte digests. dedup-hashes uses one for the HMAC-SHA256 of each row's
// normalised identity columns, and hello may use one for fingerprints (for
// example the SHA-256 of the kernel's base frequencies). A digest is the
// output of a keyed or unkeyed hash, not a row value; digests are kept out
// of tensors because their bit patterns are not finite float64 values, and
// out of every other kind so that no other message can smuggle opaque bytes.
//
// # Payload digest
//
// Every envelope carries the SHA-256 of its payload (PayloadDigest). The
// digest is computed over a canonical byte encoding, never over protobuf
// output, which is not guaranteed stable. All integers are big-endian:
//
//	"crffd/wire/v1 payload\n"
//	uint32 number of tensors
//	per tensor, in payload order:
//	    uint32 len(name), name (UTF-8)
//	    uint32 rank, then uint64 per dimension
//	    uint64 number of values, then uint64 IEEE-754 bits per value
//	uint32 number of digest lists
//	per list, in payload order:
//	    uint32 len(name), name
//	    uint64 number of digests, then 32 bytes per digest
//
// The encoding is exact to the bit (0 and -0 differ) and depends on tensor
// order, which senders keep deterministic (Matrices and Vectors sort by name).
//
// # Validation
//
// New, Validate, FromProto and Unmarshal apply the same rules: the kind is
// one of Kinds (other values decode but are refused with
// ErrKind), sender and recipient are federation names (CheckName), the size
// stays under MaxEnvelopeBytes and MaxTensors, every shape matches its value
// count, every value is finite, names are unique, digest lists appear only
// in kinds that allow them, and the payload digest matches. Errors wrap the
// sentinel errors of this package in an *Error that carries the header, so
// a dropped envelope can be logged by kind, round and peers.
//
// # Logging
//
// Envelope, Tensor and DigestList implement fmt.Stringer, fmt.GoStringer and
// slog.LogValuer, and all of them print names, shapes, sizes and digests
// only: logging an envelope by mistake never writes a payload value.
//
// # Replay and duplicates
//
// A Tracker classifies incoming envelopes against the current run and
// round as Current, Duplicate, Stale or Future, so that daemons drop
// messages of a stale run or round and repeated messages, and log why.
package wire
