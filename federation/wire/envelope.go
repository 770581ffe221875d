package wire

import (
	"errors"
	"fmt"
	"log/slog"
	"math"

	"github.com/crffd/crffd/ident"
)

// Limits on one envelope. They bound what a decoder allocates, whatever a
// peer sends.
const (
	// MaxEnvelopeBytes bounds an encoded envelope.
	MaxEnvelopeBytes = 64 << 20
	// MaxTensors bounds the number of tensors plus digest lists.
	MaxTensors = 4096
	// MaxRank bounds the number of dimensions of a tensor.
	MaxRank = 4
	// MaxValues bounds the number of float64 values in one envelope.
	MaxValues = MaxEnvelopeBytes / 8
	// MaxDigests bounds the number of digests in one envelope.
	MaxDigests = MaxEnvelopeBytes / DigestSize
)

// Sentinel errors. Validation errors wrap one of them inside an *Error.
var (
	// ErrMalformed: the bytes are not a protobuf envelope, or carry fields
	// this version does not know.
	ErrMalformed = errors.New("malformed envelope")
	// ErrTooLarge: a size limit (MaxEnvelopeBytes, MaxTensors, ...) is exceeded.
	ErrTooLarge = errors.New("envelope too large")
	// ErrKind: the kind is not one of Kinds.
	ErrKind = errors.New("unknown envelope kind")
	// ErrName: a federation, run, model or tensor name is invalid or
	// repeated. It is ident.ErrName, which the name checks wrap.
	ErrName = ident.ErrName
	// ErrHeader: a header field is missing or invalid.
	ErrHeader = errors.New("invalid envelope header")
	// ErrShape: a tensor's shape does not match its number of values.
	ErrShape = errors.New("tensor shape does not match its values")
	// ErrNonFinite: a tensor holds NaN or an infinity.
	ErrNonFinite = errors.New("tensor value not finite")
	// ErrDigestList: a digest list is malformed or not allowed in this kind.
	ErrDigestList = errors.New("invalid digest list")
	// ErrDigest: the payload does not have the SHA-256 it was sealed with.
	ErrDigest = errors.New("payload digest mismatch")
)

// Header is the routing and ordering part of an envelope. It is not
// covered by the payload digest; transports check it on its own.
type Header struct {
	RunID     string // the training run, see CheckName for the characters allowed (plus A–Z and ':')
	Model     string // the model trained, or "" when the kind concerns no single model
	Round     uint64 // the round of the run; increases monotonically over a run
	Kind      Kind
	Sender    string // federation name of the sender (CheckName)
	Recipient string // federation name of the recipient (CheckName)
}

// String summarises the header for messages and logs.
func (h Header) String() string {
	model := ""
	if h.Model != "" {
		model = " " + h.Model
	}
	return fmt.Sprintf("%s%s round %d run %q from %q to %q", h.Kind, model, h.Round, h.RunID, h.Sender, h.Recipient)
}

// check validates the header fields.
func (h Header) check() error {
	if !h.Kind.Known() {
		return fmt.Errorf("%s: %w", h.Kind, ErrKind)
	}
	if err := ident.CheckRunID(h.RunID); err != nil {
		return fmt.Errorf("%w: %w", ErrHeader, err)
	}
	if h.Model != "" {
		if err := ident.CheckModel(h.Model); err != nil {
			return fmt.Errorf("%w: %w", ErrHeader, err)
		}
	}
	if err := CheckName(h.Sender); err != nil {
		return fmt.Errorf("%w: sender: %w", ErrHeader, err)
	}
	if err := CheckName(h.Recipient); err != nil {
		return fmt.Errorf("%w: recipient: %w", ErrHeader, err)
	}
	if h.Sender == h.Recipient {
		return fmt.Errorf("%w: sender and recipient are both %q", ErrHeader, h.Sender)
	}
	return nil
}

// Error is a validation error with the header of the envelope it concerns,
// so that a dropped envelope can be logged by kind, round and peers. The
// header may be partly empty when decoding failed early.
type Error struct {
	Header Header
	Err    error
}

// Error describes the envelope by its header and the reason.
func (e *Error) Error() string { return "wire: " + e.Header.String() + ": " + e.Err.Error() }

// Unwrap returns the reason, which wraps a sentinel error of this package.
func (e *Error) Unwrap() error { return e.Err }

// Envelope is one message between daemons: a header and a payload of named
// tensors and, for hello and dedup-hashes, digest lists, sealed with the
// SHA-256 of the payload. Build one with New; read one with Unmarshal or
// FromProto. The payload is fixed when the envelope is built; the header
// may be changed (it is checked again by Validate and Marshal).
type Envelope struct {
	Header
	tensors []Tensor
	lists   []DigestList
	digest  Digest
}

// New checks h and the payload and returns an envelope sealed with the
// payload's digest. The envelope keeps the tensors' slices: do not change
// them afterwards. Errors are *Error values wrapping a sentinel error.
func New(h Header, tensors []Tensor, lists ...DigestList) (*Envelope, error) {
	e := &Envelope{Header: h, tensors: tensors, lists: lists}
	if err := h.check(); err != nil {
		return nil, &Error{Header: h, Err: err}
	}
	if err := e.checkPayload(); err != nil {
		return nil, &Error{Header: h, Err: err}
	}
	e.digest = PayloadDigest(tensors, lists)
	return e, nil
}

// Tensors returns the payload's tensors in order. The slice and the values
// belong to the envelope: do not change them.
func (e *Envelope) Tensors() []Tensor { return e.tensors }

// Tensor returns the tensor with the given name.
func (e *Envelope) Tensor(name string) (Tensor, bool) {
	for _, t := range e.tensors {
		if t.Name == name {
			return t, true
		}
	}
	return Tensor{}, false
}

// DigestLists returns the payload's digest lists in order. They belong to
// the envelope: do not change them.
func (e *Envelope) DigestLists() []DigestList { return e.lists }

// DigestList returns the digest list with the given name.
func (e *Envelope) DigestList(name string) (DigestList, bool) {
	for _, l := range e.lists {
		if l.Name == name {
			return l, true
		}
	}
	return DigestList{}, false
}

// PayloadDigest returns the SHA-256 the envelope was sealed with.
func (e *Envelope) PayloadDigest() Digest { return e.digest }

// PayloadBytes returns the size of the payload's numbers: 8 bytes per value
// and 32 per digest. It is what the audit and the metrics count as the
// content of a message, independent of the encoding.
func (e *Envelope) PayloadBytes() int {
	n := 0
	for _, t := range e.tensors {
		n += 8 * len(t.Values)
	}
	for _, l := range e.lists {
		n += DigestSize * len(l.Digests)
	}
	return n
}

// Validate checks the header and the payload again and that the payload
// still has the digest the envelope was sealed with.
func (e *Envelope) Validate() error {
	if err := e.Header.check(); err != nil {
		return &Error{Header: e.Header, Err: err}
	}
	if err := e.checkPayload(); err != nil {
		return &Error{Header: e.Header, Err: err}
	}
	if got := PayloadDigest(e.tensors, e.lists); got != e.digest {
		return &Error{Header: e.Header, Err: fmt.Errorf("payload has SHA-256 %s, sealed with %s: %w", got, e.digest, ErrDigest)}
	}
	return nil
}

// checkPayload checks sizes, names, shapes, finiteness and where digest
// lists may appear. Messages name tensors and positions, never values.
func (e *Envelope) checkPayload() error {
	if n := len(e.tensors) + len(e.lists); n > MaxTensors {
		return fmt.Errorf("%d tensors and digest lists, more than %d: %w", n, MaxTensors, ErrTooLarge)
	}
	names := make(map[string]bool, len(e.tensors)+len(e.lists))
	values, digests := 0, 0
	for _, t := range e.tensors {
		if err := checkTensorName(t.Name); err != nil {
			return err
		}
		if names[t.Name] {
			return fmt.Errorf("tensor name %q appears twice: %w", t.Name, ErrName)
		}
		names[t.Name] = true
		if err := t.checkShape(); err != nil {
			return err
		}
		if values += len(t.Values); values > MaxValues {
			return fmt.Errorf("more than %d values: %w", MaxValues, ErrTooLarge)
		}
		for i, v := range t.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("tensor %q: value %d is NaN or infinite: %w", t.Name, i, ErrNonFinite)
			}
		}
	}
	if len(e.lists) > 0 && !e.Kind.allowsDigests() {
		return fmt.Errorf("a %s envelope may not carry digest lists (only hello and dedup-hashes): %w", e.Kind, ErrDigestList)
	}
	for _, l := range e.lists {
		if err := checkTensorName(l.Name); err != nil {
			return err
		}
		if names[l.Name] {
			return fmt.Errorf("name %q appears twice: %w", l.Name, ErrName)
		}
		names[l.Name] = true
		if digests += len(l.Digests); digests > MaxDigests {
			return fmt.Errorf("more than %d digests: %w", MaxDigests, ErrTooLarge)
		}
	}
	if values*8+digests*DigestSize > MaxEnvelopeBytes {
		return fmt.Errorf("payload of %d values and %d digests exceeds %d bytes: %w", values, digests, MaxEnvelopeBytes, ErrTooLarge)
	}
	return nil
}

// Summary is what may be logged or audited about an envelope: the header,
// tensor names and shapes, digest-list names and lengths, sizes and the
// payload digest. It holds no payload value.
type Summary struct {
	Header
	Tensors      []string // "name[r×c]"
	DigestLists  []string // "name<n digests>"
	PayloadBytes int
	Digest       Digest
}

// Summary returns the envelope's loggable description.
func (e *Envelope) Summary() Summary {
	s := Summary{Header: e.Header, PayloadBytes: e.PayloadBytes(), Digest: e.digest}
	for _, t := range e.tensors {
		s.Tensors = append(s.Tensors, t.String())
	}
	for _, l := range e.lists {
		s.DigestLists = append(s.DigestLists, l.String())
	}
	return s
}

// Log keys of an envelope's LogValue, fixed so that log lines can be
// searched. Daemons use the same keys for their own envelope logs.
const (
	LogKeyRun       = "run"
	LogKeyModel     = "model"
	LogKeyRound     = "round"
	LogKeyKind      = "kind"
	LogKeySender    = "sender"
	LogKeyRecipient = "recipient"
	LogKeyTensors   = "tensors"
	LogKeyBytes     = "payload_bytes"
	LogKeyEncoded   = "encoded_bytes" // size of an encoded envelope, as carried
	LogKeyDigest    = "digest"
)

// LogValue logs the envelope's Summary: header, tensor count, payload size
// and digest. It never logs a payload value.
func (e *Envelope) LogValue() slog.Value {
	return slog.GroupValue(HeaderAttrs(e.Header,
		slog.Int(LogKeyTensors, len(e.tensors)+len(e.lists)),
		slog.Int(LogKeyBytes, e.PayloadBytes()),
		slog.String(LogKeyDigest, e.digest.String()))...)
}

// HeaderAttrs returns the log attributes of a header followed by extra.
func HeaderAttrs(h Header, extra ...slog.Attr) []slog.Attr {
	return append([]slog.Attr{
		slog.String(LogKeyRun, h.RunID),
		slog.String(LogKeyModel, h.Model),
		slog.Uint64(LogKeyRound, h.Round),
		slog.String(LogKeyKind, h.Kind.String()),
		slog.String(LogKeySender, h.Sender),
		slog.String(LogKeyRecipient, h.Recipient),
	}, extra...)
}

// String describes the envelope by header, size and digest.
func (e *Envelope) String() string {
	return fmt.Sprintf("%s (%d tensors, %d payload bytes, sha256 %s)", e.Header, len(e.tensors)+len(e.lists), e.PayloadBytes(), e.digest)
}

// GoString is String, so that %#v does not print payload values either.
func (e *Envelope) GoString() string { return "wire.Envelope(" + e.String() + ")" }
